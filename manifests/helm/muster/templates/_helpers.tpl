{{/* Labels shared by every object; component is passed in. */}}
{{- define "muster.labels" -}}
app.kubernetes.io/name: muster
app.kubernetes.io/part-of: muster
{{- if . }}
app.kubernetes.io/component: {{ . }}
{{- end }}
{{- end }}

{{- define "muster.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{- define "muster.validate" -}}
{{- if not (has .Values.logFormat (list "text" "json")) }}
{{- fail (printf "logFormat must be text or json, got %q" .Values.logFormat) }}
{{- end }}
{{- if lt (int .Values.replicas) 1 }}
{{- fail "replicas must be at least 1" }}
{{- end }}
{{- if or (le (float64 .Values.schedulerClient.qps) 0.0) (lt (int .Values.schedulerClient.burst) 1) }}
{{- fail (printf "schedulerClient.qps and schedulerClient.burst must be positive, got %v and %v" .Values.schedulerClient.qps .Values.schedulerClient.burst) }}
{{- end }}
{{- end }}
