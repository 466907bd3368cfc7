{{/*
Helpers of KEDA's side of the chart: whether the adapter serves the external scaler (gRPC), the TLS
material KEDA needs to call it (the serving certificate's CA, KEDA's client certificate), and the trigger
metadata. Used by the adapter's Deployment and Service, the KEDA Secret, the TriggerAuthentication and
the ScaledObjects.
*/}}

{{/*
"true" when keda.version (list root "2.18") is older than the given major.minor; fails for a KEDA older
than 2.17, whose external scaler protocol has no float target and value (targetSizeFloat,
metricValueFloat: kedacore/keda#6482), so every fractional target or value would be cut to an integer.
*/}}
{{- define "vllm-autoscale.keda.before" -}}
{{- $root := index . 0 }}
{{- $installed := printf "%s.0" $root.Values.keda.version }}
{{- if semverCompare "<2.17.0" $installed }}
{{- fail (printf "keda.version value %q must be 2.17 or later: older KEDA has no float targets and values in its external scaler protocol" $root.Values.keda.version) }}
{{- end }}
{{- if semverCompare (printf "<%s.0" (index . 1)) $installed }}true{{ end }}
{{- end }}

{{/* "true" when the adapter serves KEDA's external scaler (gRPC): autoscaler keda, or asked for beside the HPAs. */}}
{{- define "vllm-autoscale.keda.serve" -}}
{{- if or (eq .Values.autoscaler "keda") .Values.keda.serveWithHpa }}true{{ end }}
{{- end }}

{{/* The Secret the chart makes for KEDA: the CA of the serving certificate and, generated, KEDA's client certificate. */}}
{{- define "vllm-autoscale.keda.secretName" -}}
{{- printf "%s-keda" (include "vllm-autoscale.adapter.fullname" .) }}
{{- end }}

{{/* The Secret holding KEDA's client certificate (tls.crt, tls.key) and the CA that issued it (ca.crt). */}}
{{- define "vllm-autoscale.keda.clientSecretName" -}}
{{- if eq .Values.keda.clientCertificate.mode "existingSecret" }}
{{- required "keda.clientCertificate.existingSecret is required when keda.clientCertificate.mode is existingSecret" .Values.keda.clientCertificate.existingSecret }}
{{- else }}
{{- include "vllm-autoscale.keda.secretName" . }}
{{- end }}
{{- end }}

{{/*
The chart-generated client CA and KEDA's client certificate (keda.clientCertificate.mode generated), as a
dict with PEM strings caCert, cert and key: made once per render, reused from the existing Secret so that
upgrades do not rotate it (as vllm-autoscale.adapter.generatedTLS does for the serving certificate,
with ECDSA P-256 keys as there).
The certificate's common name is the identity the adapter's HTTP side would see (it grants it nothing).
*/}}
{{- define "vllm-autoscale.keda.generatedClientTLS" -}}
{{- if not (hasKey .Values "__generatedKedaTLS") }}
{{- $existing := lookup "v1" "Secret" .Release.Namespace (include "vllm-autoscale.keda.secretName" .) }}
{{- $tls := dict }}
{{- if and $existing (hasKey ($existing.data | default dict) "ca.crt") (hasKey $existing.data "tls.crt") (hasKey $existing.data "tls.key") }}
{{- $tls = dict "caCert" (index $existing.data "ca.crt" | b64dec) "cert" (index $existing.data "tls.crt" | b64dec) "key" (index $existing.data "tls.key" | b64dec) }}
{{- else }}
{{- $days := int .Values.keda.clientCertificate.validityDays }}
{{- $ca := genCAWithKey (printf "%s-keda-client-ca" (include "vllm-autoscale.adapter.fullname" .)) $days (genPrivateKey "ecdsa") }}
{{- $cert := genSignedCertWithKey "keda-operator" nil nil $days $ca (genPrivateKey "ecdsa") }}
{{- $tls = dict "caCert" $ca.Cert "cert" $cert.Cert "key" $cert.Key }}
{{- end }}
{{- $_ := set .Values "__generatedKedaTLS" $tls }}
{{- end }}
{{- toJson (get .Values "__generatedKedaTLS") }}
{{- end }}

{{/*
Where KEDA finds the CA of the adapter's serving certificate, as a JSON object {name, key}, or {} when
nothing can verify it (adapter.tls.mode selfSigned: the triggers then skip verification).
*/}}
{{- define "vllm-autoscale.keda.servingCARef" -}}
{{- $mode := .Values.adapter.tls.mode }}
{{- if has $mode (list "generated" "existingSecret") }}
{{- dict "name" (include "vllm-autoscale.keda.secretName" .) "key" "serving-ca.crt" | toJson }}
{{- else if eq $mode "certManager" }}
{{- /* cert-manager writes the issuing CA into ca.crt (CA and self-signed issuers do). */}}
{{- dict "name" (include "vllm-autoscale.adapter.tlsSecretName" .) "key" "ca.crt" | toJson }}
{{- else }}
{{- dict | toJson }}
{{- end }}
{{- end }}

{{/* host:port of the adapter's gRPC port: a name the serving certificate carries. */}}
{{- define "vllm-autoscale.keda.scalerAddress" -}}
{{- printf "%s.%s.svc:%d" (include "vllm-autoscale.adapter.fullname" .) .Release.Namespace (int .Values.keda.port) }}
{{- end }}

{{/* A selector map as Kubernetes selector text (`a=b,c=d`, keys sorted), as scalerMetadata.labelSelector takes it. */}}
{{- define "vllm-autoscale.selectorText" -}}
{{- $terms := list }}
{{- range $key, $value := . }}{{- $terms = append $terms (printf "%s=%s" $key $value) }}{{- end }}
{{- join "," $terms }}
{{- end }}
