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
