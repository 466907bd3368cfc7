{{/*
Naming and labelling helpers shared by every template of this chart (and by the alerts and dashboards
templates). Names are cut at 63 characters because DNS-1123 labels, which most object names must be, allow
no more.
*/}}

{{/* The chart name, overridable with nameOverride. */}}
{{- define "vllm-autoscale.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The fully qualified release name: "<release>-<chart>", or just the release when it already contains the
chart name, so `helm install vllm-autoscale .` does not yield "vllm-autoscale-vllm-autoscale".
*/}}
{{- define "vllm-autoscale.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* "<chart>-<version>" for the helm.sh/chart label; "+" is not allowed in label values. */}}
{{- define "vllm-autoscale.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels every object of the release carries. */}}
{{- define "vllm-autoscale.labels" -}}
helm.sh/chart: {{ include "vllm-autoscale.chart" . }}
{{ include "vllm-autoscale.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: vllm-autoscale
{{- end }}

{{/* The immutable subset of the labels: selectors may only use these. */}}
{{- define "vllm-autoscale.selectorLabels" -}}
app.kubernetes.io/name: {{ include "vllm-autoscale.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Name of the adapter's objects. */}}
{{- define "vllm-autoscale.adapter.fullname" -}}
{{- printf "%s-adapter" (include "vllm-autoscale.fullname" . | trunc 55 | trimSuffix "-") }}
{{- end }}

{{/* Labels of the adapter's objects. */}}
{{- define "vllm-autoscale.adapter.labels" -}}
{{ include "vllm-autoscale.labels" . }}
app.kubernetes.io/component: adapter
{{- end }}

{{/* Selector of the adapter's pods. */}}
{{- define "vllm-autoscale.adapter.selectorLabels" -}}
{{ include "vllm-autoscale.selectorLabels" . }}
app.kubernetes.io/component: adapter
{{- end }}

{{/* The adapter's ServiceAccount. */}}
{{- define "vllm-autoscale.adapter.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "vllm-autoscale.adapter.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret holding the adapter's serving certificate (every mode but selfSigned). */}}
{{- define "vllm-autoscale.adapter.tlsSecretName" -}}
{{- if eq .Values.adapter.tls.mode "existingSecret" }}
{{- required "adapter.tls.existingSecret.name is required when adapter.tls.mode is existingSecret" .Values.adapter.tls.existingSecret.name }}
{{- else }}
{{- printf "%s-tls" (include "vllm-autoscale.adapter.fullname" .) }}
{{- end }}
{{- end }}

{{/* DNS names the aggregator may dial the adapter's Service by. */}}
{{- define "vllm-autoscale.adapter.dnsNames" -}}
{{- $svc := include "vllm-autoscale.adapter.fullname" . }}
{{- list $svc (printf "%s.%s" $svc .Release.Namespace) (printf "%s.%s.svc" $svc .Release.Namespace) (printf "%s.%s.svc.cluster.local" $svc .Release.Namespace) | toJson }}
{{- end }}

{{/*
Deep-merge map `src` into map `dst` in place: maps merge key by key, anything else replaces. Unlike
sprig's merge/mergeOverwrite this honours `false`, 0 and "" in `src`, so a model can turn a default off.
Usage: include "vllm-autoscale.mergeInto" (list $dst $src)
*/}}
{{- define "vllm-autoscale.mergeInto" -}}
{{- $dst := index . 0 }}
{{- range $key, $value := index . 1 }}
{{- $current := get $dst $key }}
{{- if and (kindIs "map" $value) (kindIs "map" $current) }}
{{- $child := deepCopy $current }}
{{- $_ := include "vllm-autoscale.mergeInto" (list $child $value) }}
{{- $_ := set $dst $key $child }}
{{- else }}
{{- $_ := set $dst $key $value }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Resolve one entry of `models` into `out`: the `vllm` defaults with the entry merged over them, derived
values filled in, and the cross-field rules the schema cannot express enforced with `fail`.
Usage: $_ := include "vllm-autoscale.model" (dict "root" $ "raw" $raw "index" $i "out" $m)
*/}}
{{- define "vllm-autoscale.model" -}}
{{- $root := .root }}
{{- $out := .out }}
{{- $path := printf "models[%d]" (int .index) }}
{{- $_ := include "vllm-autoscale.mergeInto" (list $out (deepCopy $root.Values.vllm)) }}
{{- $_ := include "vllm-autoscale.mergeInto" (list $out .raw) }}
{{- $name := required (printf "%s.name is required" $path) $out.name }}
{{- $_ := required (printf "%s.model is required (a Hugging Face id or a path)" $path) $out.model }}
{{- if not $out.servedModelName }}{{- $_ := set $out "servedModelName" $name }}{{- end }}
{{- $prefix := include "vllm-autoscale.fullname" $root | trunc (int (sub 62 (len $name))) | trimSuffix "-" }}
{{- $_ := set $out "fullname" (printf "%s-%s" $prefix $name) }}
{{- $_ := set $out "path" $path }}
{{- if not (hasKey $root.Values.gpuPools $out.pool) }}
{{- fail (printf "%s.pool value %q must be one of %v (the keys of gpuPools)" $path $out.pool (keys $root.Values.gpuPools | sortAlpha)) }}
{{- end }}
{{- $_ := set $out "poolSettings" (get $root.Values.gpuPools $out.pool) }}
{{- $gpus := int $out.gpu.count }}
{{- $pp := int $out.pipelineParallelSize }}
{{- if ne (mod $gpus $pp) 0 }}
{{- fail (printf "%s.pipelineParallelSize value %d must divide gpu.count (%d): tensor-parallel size is gpu.count / pipelineParallelSize" $path $pp $gpus) }}
{{- end }}
{{- $_ := set $out "tensorParallelSize" (div $gpus $pp) }}
{{- if and (contains "/mig-" $out.gpu.resource) (gt $gpus 1) }}
{{- fail (printf "%s.gpu.count value %d must be 1 for the MIG resource %s: a CUDA process can use only one MIG device, so vLLM cannot spread a model over several slices (pick a larger profile or whole GPUs)" $path $gpus $out.gpu.resource) }}
{{- end }}
{{- range $kind := list "requests" "limits" }}
{{- if hasKey (get $out.resources $kind | default dict) $out.gpu.resource }}
{{- fail (printf "%s.resources.%s value %q is refused: the chart sets it from gpu.count (both request and limit)" $path $kind $out.gpu.resource) }}
{{- end }}
{{- end }}
{{- /*
vLLM's FlexibleArgumentParser turns "_" into "-" in flag names and argparse accepts unambiguous
prefixes, so "--disable_log_stats" and "--disable-log-s" are the same flag: compare normalised names.
The schema does not check this, so that the refusal below (naming the value and why) is what users see.
*/}}
{{- range $j, $arg := $out.extraArgs }}
{{- $flag := regexReplaceAll "=.*$" (toString $arg) "" }}
{{- if hasPrefix "--" $flag }}{{- $flag = printf "--%s" ($flag | trimPrefix "--" | replace "_" "-") }}{{- end }}
{{- if and (ge (len $flag) (len "--disable-log-s")) (hasPrefix $flag "--disable-log-stats") }}
{{- fail (printf "%s.extraArgs[%d] value %q is refused: --disable-log-stats removes every vllm: metric the adapter, alerts and dashboards need" $path (int $j) $arg) }}
{{- end }}
{{- if has $flag (list "--port" "--served-model-name" "--tensor-parallel-size" "-tp" "--pipeline-parallel-size" "-pp") }}
{{- fail (printf "%s.extraArgs[%d] value %q is refused: the chart sets %s from values (port, servedModelName, gpu.count, pipelineParallelSize)" $path (int $j) $arg $flag) }}
{{- end }}
{{- end }}
{{- if $out.disaggregation.enabled }}
{{- $_ := include "vllm-autoscale.model.roles" (dict "root" $root "m" $out) }}
{{- else }}
{{- $as := $out.autoscaling }}
{{- if $as.enabled }}
{{- $_ := include "vllm-autoscale.model.autoscaling" (dict "root" $root "m" $out) }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Disaggregated serving of a resolved model `.m` (disaggregation.enabled): `.m.roles` becomes a list of
two resolved workloads, prefill then decode, each the model with its role's settings merged over it
(role settings win over the model's: a model-wide metric means nothing to one role), its own name
(<model>-<role>), its role label, its KV connector configuration and its own autoscaling. Templates
range over `.m.roles | default (list .m)`, so an aggregated model renders exactly as it did before.
*/}}
{{- define "vllm-autoscale.model.roles" -}}
{{- $root := .root }}
{{- $m := .m }}
{{- $d := $m.disaggregation }}
{{- $dpath := printf "%s.disaggregation" $m.path }}
{{- $connector := required (printf "%s.connector is required (NixlConnector or P2pNcclConnector)" $dpath) $d.connector }}
{{- $roleLabel := required (printf "%s.roleLabel is required (a pod label key, e.g. llm-d.ai/role)" $dpath) $d.roleLabel }}
{{- if eq $d.roleValues.prefill $d.roleValues.decode }}
{{- fail (printf "%s.roleValues.prefill and .decode are both %q: the two pools need distinct role labels, or each HPA would count the other role's pods" $dpath $d.roleValues.prefill) }}
{{- end }}
{{- if and (eq $connector "P2pNcclConnector") $d.proxy.enabled (not $d.proxy.command) }}
{{- fail (printf "%s.proxy.command is required with connector P2pNcclConnector: the chart's proxy speaks the kv_transfer_params protocol of NixlConnector, while P2pNcclConnector's instances register with vLLM's own xPyD proxy (examples/online_serving/disaggregated_serving_p2p_nccl_xpyd/disagg_proxy_p2p_nccl_xpyd.py) over ZMQ" $dpath) }}
{{- end }}
{{- $base := deepCopy (omit $m "disaggregation") }}
{{- $roles := list }}
{{- range $role := list "prefill" "decode" }}
{{- $u := deepCopy $base }}
{{- $_ := include "vllm-autoscale.mergeInto" (list $u (get $d $role | default dict)) }}
{{- $rpath := printf "%s.%s" $dpath $role }}
{{- $prefix := include "vllm-autoscale.fullname" $root | trunc (int (sub 61 (add (len $m.name) (len $role)))) | trimSuffix "-" }}
{{- $_ := set $u "fullname" (printf "%s-%s-%s" $prefix $m.name $role) }}
{{- $_ := set $u "modelFullname" $m.fullname }}
{{- $_ := set $u "path" $rpath }}
{{- $_ := set $u "role" $role }}
{{- $_ := set $u "roleLabel" $roleLabel }}
{{- $_ := set $u "roleValue" (get $d.roleValues $role) }}
{{- /*
The connector's kv_role: P2pNcclConnector is one-way (the prefill engine produces, the decode engine
consumes); NixlConnector is symmetric (kv_both on both) and learns the direction per request from the
kv_transfer_params the proxy sends.
*/}}
{{- $kvRole := "kv_both" }}
{{- if eq $connector "P2pNcclConnector" }}{{- $kvRole = ternary "kv_producer" "kv_consumer" (eq $role "prefill") }}{{- end }}
{{- $kv := dict "kv_connector" $connector "kv_role" $kvRole }}
{{- if eq $connector "P2pNcclConnector" }}
{{- /* Each engine registers its HTTP and ZMQ addresses with the proxy, which pairs them per request. */}}
{{- $extra := dict "proxy_ip" (printf "%s.%s.svc" $m.fullname $root.Release.Namespace) "proxy_port" (toString (int $d.proxy.discoveryPort)) "http_port" (toString (int $u.port)) }}
{{- $_ := set $kv "kv_port" (toString (int $d.kvPort)) }}
{{- $_ := set $kv "kv_connector_extra_config" $extra }}
{{- end }}
{{- $_ := include "vllm-autoscale.mergeInto" (list $kv ($d.kvTransferConfig | default dict)) }}
{{- $_ := set $u "kvTransferConfig" $kv }}
{{- range $j, $arg := $u.extraArgs }}
{{- if hasPrefix "--kv-transfer-config" (regexReplaceAll "=.*$" (toString $arg) "" | replace "_" "-") }}
{{- fail (printf "%s.extraArgs[%d] value %q is refused: the chart sets --kv-transfer-config from disaggregation.connector and disaggregation.kvTransferConfig" $rpath (int $j) $arg) }}
{{- end }}
{{- end }}
{{- if $u.autoscaling.enabled }}
{{- $_ := include "vllm-autoscale.model.autoscaling" (dict "root" $root "m" $u) }}
{{- end }}
{{- $roles = append $roles $u }}
{{- end }}
{{- $_ := set $m "roles" $roles }}
{{- $prefix := include "vllm-autoscale.fullname" $root | trunc (int (sub 56 (len $m.name))) | trimSuffix "-" }}
{{- $_ := set $m "proxyFullname" (printf "%s-%s-proxy" $prefix $m.name) }}
{{- end }}

{{/*
The autoscaling of a resolved model `.m` (autoscaling.enabled): the cap, the metrics with their target
type and selector resolved into `.m.hpaMetrics`, and the rules of scale to zero and of KEDA's fallback.
Each hpaMetrics item: name, type (AverageValue or Value), target (the quantity as configured), selector
(a map, possibly empty) and activationTarget (KEDA only; null when not set).
*/}}
{{- define "vllm-autoscale.model.autoscaling" -}}
{{- $root := .root }}
{{- $m := .m }}
{{- $as := $m.autoscaling }}
{{- $path := $m.path }}
{{- $who := printf "of model %q" $m.name }}
{{- $keda := eq $root.Values.autoscaler "keda" }}
{{- $max := required (printf "%s.autoscaling.maxReplicas is required: a cap on GPU replicas is mandatory" $path) $as.maxReplicas }}
{{- if gt (int $as.minReplicas) (int $max) }}
{{- fail (printf "%s.autoscaling.minReplicas value %d must be at most maxReplicas (%d)" $path (int $as.minReplicas) (int $max)) }}
{{- end }}
{{- $metrics := $as.metrics }}
{{- if and (not $metrics) (eq ($m.role | default "") "prefill") }}
{{- /* The TTFT a prefill pool adds is its backlog in seconds: scale it to keep that below a second. */}}
{{- $metrics = list (dict "name" "vllm_prefill_backlog_seconds" "value" 1) }}
{{- else if and (not $metrics) (eq ($m.role | default "") "decode") }}
{{- /* A decode pool is bounded by its KV cache and its batch: whichever fills first proposes. */}}
{{- $metrics = list (dict "name" "vllm_kv_cache_usage" "value" "800m") (dict "name" "vllm_requests_running" "averageValue" (div (mul (int $m.maxNumSeqs) 3) 4)) }}
{{- else if not $metrics }}
{{- $metrics = list (dict "name" "vllm_requests_inflight" "averageValue" (div (mul (int $m.maxNumSeqs) 3) 4)) }}
{{- end }}
{{- $served := include "vllm-autoscale.adapter.metricNames" $root | fromJsonArray }}
{{- $builtin := include "vllm-autoscale.adapter.builtinMetricNames" $root | fromJsonArray }}
{{- $backlogs := include "vllm-autoscale.adapter.backlogMetricNames" $root | fromJsonArray }}
{{- $resolved := list }}
{{- $upstream := list }}
{{- $perReplica := list }}
{{- range $j, $metric := $metrics }}
{{- $at := printf "%s.autoscaling.metrics[%d]" $path (int $j) }}
{{- if not (has $metric.name $served) }}
{{- fail (printf "%s.name value %q must be a metric the adapter serves: one of %v (define user metrics in adapter.config.metrics)" $at $metric.name $served) }}
{{- end }}
{{- if has $metric.name $builtin }}
{{- $perReplica = append $perReplica $metric.name }}
{{- else }}
{{- $upstream = append $upstream $metric.name }}
{{- end }}
{{- if and (hasKey $metric "activationTarget") (not $keda) }}
{{- fail (printf "%s.activationTarget %s applies to autoscaler \"keda\" only: an HPA has no activation threshold" $at $who) }}
{{- end }}
{{- $selector := $metric.selector | default dict }}
{{- if and (not $selector) (has $metric.name $builtin) }}
{{- /* vLLM puts the served model name on every series as model_name. */}}
{{- $selector = dict "model_name" $m.servedModelName }}
{{- end }}
{{- if and (has $metric.name $backlogs) (ne ($m.role | default "") "prefill") }}
{{- fail (printf "%s.name value %q %s is the prefill pool's signal: use it in disaggregation.prefill.autoscaling.metrics (disaggregation.enabled true)" $at $metric.name $who) }}
{{- end }}
{{- if and (eq $metric.name "vllm_kv_fetch_requests") (ne ($m.role | default "") "decode") }}
{{- fail (printf "%s.name value %q %s is the decode pool's signal (KV hand-overs it receives): use it in disaggregation.decode.autoscaling.metrics (disaggregation.enabled true)" $at $metric.name $who) }}
{{- end }}
{{- if and $m.role (has $metric.name $builtin) (not (hasKey $selector $m.roleLabel)) }}
{{- /* Both roles serve the same model_name: only the role label tells one pool's pods from the other's. */}}
{{- $selector = merge (dict $m.roleLabel $m.roleValue) $selector }}
{{- end }}
{{- $type := ternary "AverageValue" "Value" (hasKey $metric "averageValue") }}
{{- $target := ternary $metric.averageValue $metric.value (hasKey $metric "averageValue") }}
{{- $resolved = append $resolved (dict "name" $metric.name "type" $type "target" $target "selector" $selector "activationTarget" $metric.activationTarget "path" $at) }}
{{- end }}
{{- /*
Kubernetes' HPAScaleToZero lets minReplicas be 0 only beside an External or Object metric, and the HPA
computes from zero only those. Every metric of this chart is External, but the vLLM ones come from the
replicas themselves: at zero they vanish (the adapter answers 503), so only an upstream metric (one
defined in adapter.config.metrics, such as queue_depth) can wake the model. KEDA's activation is the
same question (IsActive of a vLLM metric at zero is an error).
*/}}
{{- if and (eq (int $as.minReplicas) 0) (not $upstream) }}
{{- fail (printf "%s.autoscaling.minReplicas value 0 %s needs an External metric that exists without replicas, defined in adapter.config.metrics (such as queue_depth on the upstream queue): Kubernetes scales from zero only on an External or Object metric, and %s vanish with the last replica" $path $who (join ", " ($perReplica | uniq))) }}
{{- end }}
{{- if $keda }}
{{- $_ := include "vllm-autoscale.keda.before" (list $root "2.17") }}
{{- /*
KEDA stores a target in milli-units (v2.17-2.19 truncate, v2.20 rounds: pkg/scalers/scaler.go
GetMetricTargetMili): below 1m the HPA would get 0, which the adapter refuses too.
*/}}
{{- range $metric := $resolved }}
{{- if lt (include "vllm-autoscale.quantityFloat" $metric.target | float64) 0.001 }}
{{- fail (printf "%s target %v %s must be at least 1m (0.001) with autoscaler keda: KEDA keeps targets in milli-units, so a smaller one reaches the HPA as 0" $metric.path $metric.target $who) }}
{{- end }}
{{- end }}
{{- $fallback := $as.keda.fallback }}
{{- /*
Before 2.18 KEDA's fallback covers AverageValue triggers only and computes from the target cut to an
integer (pkg/fallback/fallback.go, v2.17.0); from 2.18 Value triggers too, with the float target.
*/}}
{{- if and (not (kindIs "invalid" $fallback.replicas)) (include "vllm-autoscale.keda.before" (list $root "2.18")) }}
{{- range $metric := $resolved }}
{{- if ne $metric.type "AverageValue" }}
{{- fail (printf "%s.value is refused with autoscaling.keda.fallback %s on keda.version %s: KEDA before 2.18 applies a fallback to AverageValue triggers only (use averageValue, KEDA 2.18 or later, or set fallback.replicas to null)" $metric.path $who $root.Values.keda.version) }}
{{- end }}
{{- $value := include "vllm-autoscale.quantityFloat" $metric.target | float64 }}
{{- if or (lt $value 1.0) (ne $value (floor $value)) }}
{{- fail (printf "%s.averageValue %v %s must be a whole number of at least 1 with autoscaling.keda.fallback on keda.version %s: KEDA before 2.18 computes the fallback value from the target cut to an integer (%v), so it would not hold fallback.replicas (%d)" $metric.path $metric.target $who $root.Values.keda.version (floor $value) (int $fallback.replicas)) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- $_ := set $m "hpaMetrics" $resolved }}
{{- end }}

{{/*
A Kubernetes quantity (a number, or a string such as 500m, 2k, 1Gi, 1e3) as a plain decimal number, for
comparisons in templates; the schema has already checked the syntax.
*/}}
{{- define "vllm-autoscale.quantityFloat" -}}
{{- if not (kindIs "string" .) }}{{ float64 . }}{{ else }}
{{- $text := trimPrefix "+" . }}
{{- $factor := 1.0 }}
{{- $factors := dict "m" 0.001 "k" 1000.0 "M" 1000000.0 "G" 1000000000.0 "T" 1000000000000.0 "P" 1000000000000000.0 "E" 1000000000000000000.0 "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 "Pi" 1125899906842624.0 "Ei" 1152921504606846976.0 }}
{{- range $suffix, $value := $factors }}
{{- if eq (regexFind "[A-Za-z]+$" $text) $suffix }}
{{- $factor = $value }}
{{- $text = trimSuffix $suffix $text }}
{{- end }}
{{- end }}
{{- mulf (float64 $text) $factor }}
{{- end }}
{{- end }}

{{/*
JSON list of the metrics the vLLM replicas themselves report (adapter/vocabulary/catalogue.py's built-ins and
adapter/vocabulary/disaggregated.py's, plus every configured saturation metric, one with a `capacity`,
and every prefill backlog metric, one with a `prefill_throughput`: both computed from the replicas'
gauges). They get the model's default selector and vanish with the last replica.
*/}}
{{- define "vllm-autoscale.adapter.builtinMetricNames" -}}
{{- $names := list "vllm_requests_waiting" "vllm_requests_running" "vllm_requests_inflight" "vllm_kv_cache_usage" "vllm_tpot_seconds" "vllm_ttft_seconds" "vllm_kv_fetch_requests" }}
{{- range $name, $settings := .Values.adapter.config.metrics }}
{{- if and (kindIs "map" $settings) (hasKey $settings "capacity") }}{{- $names = append $names $name }}{{- end }}
{{- end }}
{{- concat $names (include "vllm-autoscale.adapter.backlogMetricNames" . | fromJsonArray) | uniq | toJson }}
{{- end }}

{{/*
JSON list of the prefill backlog metrics: the built-in name, which the chart configures from the models'
disaggregation.prefillThroughput, and every adapter.config.metrics entry with a `prefill_throughput`
(a backlog metric of its own name, for a model whose measured throughput differs). Only a prefill pool
may scale on them: the adapter binds them to the prefill role.
*/}}
{{- define "vllm-autoscale.adapter.backlogMetricNames" -}}
{{- $names := list "vllm_prefill_backlog_seconds" }}
{{- range $name, $settings := .Values.adapter.config.metrics }}
{{- if and (kindIs "map" $settings) (hasKey $settings "prefill_throughput") }}{{- $names = append $names $name }}{{- end }}
{{- end }}
{{- $names | uniq | toJson }}
{{- end }}

{{/*
JSON list of the external metric names the adapter serves: the built-ins, the inference gateway's
(upstream of the replicas: they exist at zero and take no default selector) and configured user metrics.
*/}}
{{- define "vllm-autoscale.adapter.metricNames" -}}
{{- $names := concat (include "vllm-autoscale.adapter.builtinMetricNames" . | fromJsonArray) (list "gateway_queue_size" "gateway_requests_running") }}
{{- range $name, $_ := .Values.adapter.config.metrics }}
{{- if not (has $name $names) }}{{- $names = append $names $name }}{{- end }}
{{- end }}
{{- toJson $names }}
{{- end }}

{{/* Labels of one model's objects; `.m` is a resolved model. */}}
{{- define "vllm-autoscale.vllm.labels" -}}
{{ include "vllm-autoscale.labels" .root }}
{{ include "vllm-autoscale.vllm.modelLabels" . }}
{{- end }}

{{/* Selector of one model's pods. */}}
{{- define "vllm-autoscale.vllm.selectorLabels" -}}
{{ include "vllm-autoscale.selectorLabels" .root }}
{{ include "vllm-autoscale.vllm.modelLabels" . }}
{{- end }}

{{- define "vllm-autoscale.vllm.modelLabels" -}}
app.kubernetes.io/component: vllm
vllm-autoscale.io/model: {{ .m.name }}
{{- if .m.role }}
{{ .m.roleLabel }}: {{ .m.roleValue }}
{{- end }}
{{- end }}

{{/* Labels and selector of a disaggregated model's P/D proxy; `.m` is the resolved model. */}}
{{- define "vllm-autoscale.proxy.selectorLabels" -}}
{{ include "vllm-autoscale.selectorLabels" .root }}
app.kubernetes.io/component: pd-proxy
vllm-autoscale.io/model: {{ .m.name }}
{{- end }}

{{- define "vllm-autoscale.proxy.labels" -}}
{{ include "vllm-autoscale.labels" .root }}
app.kubernetes.io/component: pd-proxy
vllm-autoscale.io/model: {{ .m.name }}
{{- end }}

{{/* A quantity from a number or a string, quoted. */}}
{{- define "vllm-autoscale.quantity" -}}
{{- if kindIs "string" . }}{{ quote . }}{{ else if eq (float64 .) (floor .) }}{{ int64 . | quote }}{{ else }}{{ toString . | quote }}{{ end }}
{{- end }}

{{/*
The chart-generated CA and serving certificate (adapter.tls.mode generated), as a dict with PEM strings
caCert, cert and key. Made once per render and cached in .Values, because both the Secret and the
APIService's caBundle need the same CA; an existing Secret is reused so upgrades do not rotate it.
Keys are ECDSA P-256: genCA's RSA 2048 keys cost ~0.4 s of CPU each, on every render where lookup sees
no Secret (`helm template`, and GitOps controllers such as Argo CD, which render on each sync).
*/}}
{{- define "vllm-autoscale.adapter.generatedTLS" -}}
{{- if not (hasKey .Values "__generatedTLS") }}
{{- $secretName := include "vllm-autoscale.adapter.tlsSecretName" . }}
{{- $existing := lookup "v1" "Secret" .Release.Namespace $secretName }}
{{- $tls := dict }}
{{- if and $existing (hasKey ($existing.data | default dict) "ca.crt") (hasKey $existing.data "tls.crt") (hasKey $existing.data "tls.key") }}
{{- $tls = dict "caCert" (index $existing.data "ca.crt" | b64dec) "cert" (index $existing.data "tls.crt" | b64dec) "key" (index $existing.data "tls.key" | b64dec) }}
{{- else }}
{{- $days := int .Values.adapter.tls.validityDays }}
{{- $ca := genCAWithKey (printf "%s-ca" (include "vllm-autoscale.adapter.fullname" .)) $days (genPrivateKey "ecdsa") }}
{{- $dnsNames := include "vllm-autoscale.adapter.dnsNames" . | fromJsonArray }}
{{- $cert := genSignedCertWithKey (index $dnsNames 2) nil $dnsNames $days $ca (genPrivateKey "ecdsa") }}
{{- $tls = dict "caCert" $ca.Cert "cert" $cert.Cert "key" $cert.Key }}
{{- end }}
{{- $_ := set .Values "__generatedTLS" $tls }}
{{- end }}
{{- toJson (get .Values "__generatedTLS") }}
{{- end }}

{{/*
Relabelings of every monitor of the chart: the adapter turns an HPA's namespace into a namespace="<ns>"
matcher and the alerts and dashboards name pods, so every series must carry both. Spelled out rather
than left to prometheus-operator's defaults, which differ between PodMonitor and ServiceMonitor.
*/}}
{{- define "vllm-autoscale.monitorRelabelings" -}}
- sourceLabels: [__meta_kubernetes_namespace]
  targetLabel: namespace
- sourceLabels: [__meta_kubernetes_pod_name]
  targetLabel: pod
{{- end }}

{{/*
Relabelings that copy each disaggregated model's role label from its pods onto the series (Prometheus
spells `llm-d.ai/role` as `llm_d_ai_role`, as its service discovery and the adapter do), so that the
adapter's Prometheus source, the alerts and the dashboards can tell prefill from decode. Empty when no
model is disaggregated.
*/}}
{{- define "vllm-autoscale.roleRelabelings" -}}
{{- $keys := list }}
{{- range $i, $raw := .Values.models }}
{{- $model := dict }}
{{- $_ := include "vllm-autoscale.model" (dict "root" $ "raw" $raw "index" $i "out" $model) }}
{{- if $model.roles }}{{- $keys = append $keys $model.disaggregation.roleLabel }}{{- end }}
{{- end }}
{{- range $key := $keys | uniq | sortAlpha }}
{{- $name := regexReplaceAll "[^a-zA-Z0-9_]" $key "_" }}
- sourceLabels: [__meta_kubernetes_pod_label_{{ $name }}]
  targetLabel: {{ $name }}
{{- end }}
{{- end }}


{{/*
The adapter's configuration as JSON: adapter.config, plus what the disaggregated models need the
adapter to know (docs/metrics.md "Prefill and decode apart"):
- `roles` from their roleLabel and roleValues. The adapter reads one role label, so every
  disaggregated model must use the same one (and adapter.config.roles, if set, must agree);
- `metrics.vllm_prefill_backlog_seconds.prefill_throughput` from disaggregation.prefillThroughput of
  each model whose prefill pool scales on it (required there: the adapter does not serve the backlog
  without a measured throughput, and the chart refuses to guess one). One metric has one throughput:
  models that differ each need a backlog metric of their own (adapter.config.metrics.<name> with its
  prefill_throughput and no query, named in that model's disaggregation.prefill.autoscaling.metrics);
- `scrape.pod_labels` with the role label, when the scrape source discovers pods (an EndpointSlice
  names its pods but not their labels; static targets carry theirs in scrape.targets[].labels).
Used by the ConfigMap, the adapter's checksum annotation and the discovery ClusterRole (pods `list`
only when pod_labels is set). Without a disaggregated model it is adapter.config unchanged.
*/}}
{{- define "vllm-autoscale.adapter.config" -}}
{{- $config := deepCopy .Values.adapter.config }}
{{- $backlog := "vllm_prefill_backlog_seconds" }}
{{- $roles := dict }}
{{- $rolesFrom := "" }}
{{- $throughput := 0.0 }}
{{- $throughputFrom := "" }}
{{- $metrics := $config.metrics | default dict }}
{{- $configured := get $metrics $backlog | default dict }}
{{- if hasKey $configured "prefill_throughput" }}
{{- $throughput = float64 $configured.prefill_throughput }}
{{- $throughputFrom = printf "adapter.config.metrics.%s.prefill_throughput" $backlog }}
{{- end }}
{{- range $i, $raw := .Values.models }}
{{- $model := dict }}
{{- $_ := include "vllm-autoscale.model" (dict "root" $ "raw" $raw "index" $i "out" $model) }}
{{- if $model.roles }}
{{- $d := $model.disaggregation }}
{{- $dpath := printf "%s.disaggregation" $model.path }}
{{- $mine := dict "label" $d.roleLabel "prefill" $d.roleValues.prefill "decode" $d.roleValues.decode }}
{{- $series := regexReplaceAll "[^a-zA-Z0-9_]" $d.roleLabel "_" }}
{{- if has $series (list "namespace" "pod" "instance" "service" "model_name" "engine") }}
{{- fail (printf "%s.roleLabel value %q is refused: Prometheus and the adapter carry it as %q, a label the series already have; use a key of its own, e.g. llm-d.ai/role" $dpath $d.roleLabel $series) }}
{{- end }}
{{- if not $roles }}
{{- $roles = $mine }}
{{- $rolesFrom = $dpath }}
{{- else if ne (toJson $mine) (toJson $roles) }}
{{- fail (printf "%s.roleLabel and roleValues (%s=%s|%s) differ from %s's (%s=%s|%s): the adapter, the alerts and the dashboards read one role label, so every disaggregated model of a release must use the same" $dpath $mine.label $mine.prefill $mine.decode $rolesFrom $roles.label $roles.prefill $roles.decode) }}
{{- end }}
{{- $prefill := index $model.roles 0 }}
{{- $scalesOnBacklog := false }}
{{- range $metric := $prefill.hpaMetrics | default list }}
{{- if eq $metric.name $backlog }}{{- $scalesOnBacklog = true }}{{- end }}
{{- end }}
{{- if $scalesOnBacklog }}
{{- $key := printf "%s.prefillThroughput" $dpath }}
{{- if kindIs "invalid" $d.prefillThroughput }}
{{- fail (printf "%s is required: the prefill pool scales on %s, which the adapter serves only with the prompt tokens per second one prefill pod computes through the P/D path; measure it with `vllm-autoscale profile` of a prefill-decode pair of this model (helm/README.md \"Prefill and decode apart\")" $key $backlog) }}
{{- end }}
{{- $mineThroughput := float64 $d.prefillThroughput }}
{{- if not $throughputFrom }}
{{- $throughput = $mineThroughput }}
{{- $throughputFrom = $key }}
{{- else if ne $mineThroughput $throughput }}
{{- fail (printf "%s value %v differs from %s (%v): the adapter's %s has one throughput; give one of the models a backlog metric of its own (adapter.config.metrics.<name> with its prefill_throughput and no query, named in its disaggregation.prefill.autoscaling.metrics)" $key $d.prefillThroughput $throughputFrom $throughput $backlog) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- if $roles }}
{{- $given := $config.roles | default dict }}
{{- range $field := list "label" "prefill" "decode" }}
{{- if and (hasKey $given $field) (ne (get $given $field) (get $roles $field)) }}
{{- fail (printf "adapter.config.roles.%s value %q differs from %s (%q): the chart configures the adapter's roles from the disaggregated models; leave adapter.config.roles unset" $field (get $given $field) $rolesFrom (get $roles $field)) }}
{{- end }}
{{- end }}
{{- $_ := set $config "roles" $roles }}
{{- if and (eq $config.source "scrape") (not ($config.scrape.targets | default list)) }}
{{- $labels := concat ($config.scrape.pod_labels | default list) (list $roles.label) | uniq }}
{{- $_ := set $config.scrape "pod_labels" $labels }}
{{- end }}
{{- end }}
{{- if $throughputFrom }}
{{- $settings := deepCopy $configured }}
{{- $_ := set $settings "prefill_throughput" $throughput }}
{{- $_ := set $metrics $backlog $settings }}
{{- $_ := set $config "metrics" $metrics }}
{{- end }}
{{- toJson $config }}
{{- end }}
