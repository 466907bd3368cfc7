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
{{- $as := $out.autoscaling }}
{{- if $as.enabled }}
{{- $max := required (printf "%s.autoscaling.maxReplicas is required: a cap on GPU replicas is mandatory" $path) $as.maxReplicas }}
{{- if gt (int $as.minReplicas) (int $max) }}
{{- fail (printf "%s.autoscaling.minReplicas value %d must be at most maxReplicas (%d)" $path (int $as.minReplicas) (int $max)) }}
{{- end }}
{{- $metrics := $as.metrics }}
{{- if not $metrics }}
{{- $metrics = list (dict "name" "vllm_requests_inflight" "averageValue" (div (mul (int $out.maxNumSeqs) 3) 4)) }}
{{- end }}
{{- $served := include "vllm-autoscale.adapter.metricNames" $root | fromJsonArray }}
{{- $names := list }}
{{- range $j, $metric := $metrics }}
{{- if not (has $metric.name $served) }}
{{- fail (printf "%s.autoscaling.metrics[%d].name value %q must be a metric the adapter serves: one of %v (define user metrics in adapter.config.metrics)" $path (int $j) $metric.name $served) }}
{{- end }}
{{- $names = append $names $metric.name }}
{{- end }}
{{- if eq (int $as.minReplicas) 0 }}
{{- if not (has "queue_depth" $names) }}
{{- fail (printf "%s.autoscaling.minReplicas value 0 needs a queue_depth metric in autoscaling.metrics: vLLM metrics vanish with the last replica, so only the upstream queue can scale from zero" $path) }}
{{- end }}
{{- end }}
{{- $_ := set $out "hpaMetrics" $metrics }}
{{- end }}
{{- end }}

{{/* JSON list of the external metric names the adapter serves: the built-ins plus configured user metrics. */}}
{{- define "vllm-autoscale.adapter.metricNames" -}}
{{- $names := list "vllm_requests_waiting" "vllm_requests_running" "vllm_requests_inflight" "vllm_kv_cache_usage" "vllm_tpot_seconds" "vllm_ttft_seconds" }}
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
{{- end }}

{{/* A quantity from a number or a string, quoted. */}}
{{- define "vllm-autoscale.quantity" -}}
{{- if kindIs "string" . }}{{ quote . }}{{ else if eq (float64 .) (floor .) }}{{ int64 . | quote }}{{ else }}{{ toString . | quote }}{{ end }}
{{- end }}

{{/*
The chart-generated CA and serving certificate (adapter.tls.mode generated), as a dict with PEM strings
caCert, cert and key. Made once per render and cached in .Values, because both the Secret and the
APIService's caBundle need the same CA; an existing Secret is reused so upgrades do not rotate it.
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
{{- $ca := genCA (printf "%s-ca" (include "vllm-autoscale.adapter.fullname" .)) $days }}
{{- $dnsNames := include "vllm-autoscale.adapter.dnsNames" . | fromJsonArray }}
{{- $cert := genSignedCert (index $dnsNames 2) nil $dnsNames $days $ca }}
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
