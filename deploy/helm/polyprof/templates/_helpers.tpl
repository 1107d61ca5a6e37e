{{- define "polyprof.fullname" -}}
{{- printf "%s" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "polyprof.secretName" -}}
{{- if .Values.existingSecret -}}{{ .Values.existingSecret }}{{- else -}}{{ include "polyprof.fullname" . }}-token{{- end -}}
{{- end -}}

{{- define "polyprof.labels" -}}
app.kubernetes.io/name: polyprof
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}
