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

{{/* "true" when the pod-grouper runs in native or auto mode, else "". */}}
{{- define "muster.native" -}}
{{- if ne .Values.podGrouper.podGroupAPI "scheduler-plugins" }}true{{ end }}
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
{{- $pg := .Values.podGrouper }}
{{- if not (has $pg.podGroupAPI (list "scheduler-plugins" "native" "auto")) }}
{{- fail (printf "podGrouper.podGroupAPI must be scheduler-plugins, native or auto, got %q" $pg.podGroupAPI) }}
{{- end }}
{{- if and $pg.webhook.certManager.enabled (not (include "muster.native" .)) }}
{{- fail "podGrouper.webhook.certManager.enabled needs podGrouper.podGroupAPI native or auto: scheduler-plugins mode has no webhook" }}
{{- end }}
{{- if include "muster.native" . }}
{{- if empty $pg.nativeSchedulerNames }}
{{- fail "podGrouper.nativeSchedulerNames must name at least one scheduler (default-scheduler: the default kube-scheduler places native gangs)" }}
{{- end }}
{{- if or (lt (int $pg.webhook.timeoutSeconds) 1) (gt (int $pg.webhook.timeoutSeconds) 30) }}
{{- fail (printf "podGrouper.webhook.timeoutSeconds must be 1..30 (the apiserver's limits), got %v" $pg.webhook.timeoutSeconds) }}
{{- end }}
{{- if or (lt (int $pg.webhook.port) 1024) (gt (int $pg.webhook.port) 65535) (eq (int $pg.webhook.port) 10261) }}
{{- fail (printf "podGrouper.webhook.port must be 1024..65535 (the container runs as non-root, without capabilities) and not 10261 (the pod-grouper's health port), got %v" $pg.webhook.port) }}
{{- end }}
{{- end }}
{{- end }}
