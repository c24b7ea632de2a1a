{{/* The chart's name, at most 63 characters. */}}
{{- define "admit.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's full name, the prefix of every object's name. */}}
{{- define "admit.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The labels that select the pods. */}}
{{- define "admit.selectorLabels" -}}
app.kubernetes.io/name: {{ include "admit.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The labels of every object. */}}
{{- define "admit.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "admit.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "admit.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "admit.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The chart's own Secret. */}}
{{- define "admit.secretName" -}}
{{- include "admit.fullname" . -}}
{{- end -}}

{{/* Whether the pods get an HMAC secret: on Redis always, on memory when one is given. */}}
{{- define "admit.hasHMAC" -}}
{{- if or (not .Values.memory) .Values.hmacSecret.value .Values.hmacSecret.existingSecret -}}true{{- end -}}
{{- end -}}

{{/* The HMAC secret the chart keeps: the value given, else the one in the cluster, else a new one. */}}
{{- define "admit.hmacValue" -}}
{{- if .Values.hmacSecret.value -}}
{{- .Values.hmacSecret.value -}}
{{- else -}}
{{- $old := lookup "v1" "Secret" .Release.Namespace (include "admit.secretName" .) -}}
{{- if and $old $old.data (index $old.data "hmac-secret") -}}
{{- index $old.data "hmac-secret" | b64dec -}}
{{- else -}}
{{- randAlphaNum 48 -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Whether the chart's own Secret holds anything. */}}
{{- define "admit.ownSecret" -}}
{{- if or (and (include "admit.hasHMAC" .) (not .Values.hmacSecret.existingSecret)) (and .Values.admin.enabled (not .Values.admin.existingSecret)) (and (not .Values.memory) .Values.redis.url) -}}true{{- end -}}
{{- end -}}

{{/* The checks that refuse to render; each says what to set. */}}
{{- define "admit.validate" -}}
{{- if and (not .Values.memory) (not .Values.redis.url) (not .Values.redis.existingSecret) -}}
{{- fail "admit: set redis.url (the Redis every pod shares), or memory: true to keep each pod's limits in its own memory, where N pods admit N times every limit" -}}
{{- end -}}
{{- if and .Values.memory (or .Values.redis.url .Values.redis.existingSecret) -}}
{{- fail "admit: memory: true and redis.url (or redis.existingSecret) are both set; choose one backend" -}}
{{- end -}}
{{- if and .Values.redis.url (not (regexMatch "^(redis|rediss|unix)://" .Values.redis.url)) -}}
{{- fail "admit: redis.url must start with redis://, rediss:// or unix://" -}}
{{- end -}}
{{- if and .Values.hmacSecret.value .Values.hmacSecret.existingSecret -}}
{{- fail "admit: hmacSecret.value and hmacSecret.existingSecret are both set; choose one" -}}
{{- end -}}
{{- if and .Values.hmacSecret.value (lt (len .Values.hmacSecret.value) 16) -}}
{{- fail "admit: hmacSecret.value must be at least 16 bytes" -}}
{{- end -}}
{{- if .Values.admin.enabled -}}
{{- if and .Values.admin.token .Values.admin.existingSecret -}}
{{- fail "admit: admin.token and admin.existingSecret are both set; choose one" -}}
{{- end -}}
{{- if not (or .Values.admin.token .Values.admin.existingSecret) -}}
{{- fail "admit: admin.enabled needs admin.token (at least 16 bytes) or admin.existingSecret" -}}
{{- end -}}
{{- if and .Values.admin.token (lt (len .Values.admin.token) 16) -}}
{{- fail "admit: admin.token must be at least 16 bytes" -}}
{{- end -}}
{{- end -}}
{{- if not .Values.config -}}
{{- fail "admit: config must hold the policy configuration (at least policies:)" -}}
{{- end -}}
{{- with .Values.config.server -}}
{{- $server := . -}}
{{- range $field := list "listen" "redis" "hmac_secret_file" "tls" "client_tokens_file" -}}
{{- if hasKey $server $field -}}
{{- fail (printf "admit: config.server.%s is set by the chart; use the chart's values (redis.url, hmacSecret, tls, clientTokens) instead" $field) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and .Values.tls.enabled (not .Values.tls.secretName) -}}
{{- fail "admit: tls.enabled needs tls.secretName, a Secret of type kubernetes.io/tls (tls.crt, tls.key, and ca.crt with tls.clientCA)" -}}
{{- end -}}
{{- if and .Values.tls.clientCA (not .Values.tls.enabled) -}}
{{- fail "admit: tls.clientCA needs tls.enabled: client certificates are asked for over TLS only" -}}
{{- end -}}
{{- if and .Values.envoy.enabled (not .Values.envoy.config) -}}
{{- fail "admit: envoy.enabled needs envoy.config, envoyproxy/ratelimit's files by name" -}}
{{- end -}}
{{- end -}}

{{/* The configuration file: config, with the server settings the chart owns. */}}
{{- define "admit.config" -}}
{{- $config := deepCopy .Values.config -}}
{{- $server := get $config "server" | default dict -}}
{{- if .Values.tls.enabled -}}
{{- $tls := dict "cert_file" "/etc/admit/tls/tls.crt" "key_file" "/etc/admit/tls/tls.key" -}}
{{- if .Values.tls.clientCA -}}
{{- $_ := set $tls "client_ca_file" "/etc/admit/tls/ca.crt" -}}
{{- end -}}
{{- $_ := set $server "tls" $tls -}}
{{- end -}}
{{- if .Values.clientTokens.existingSecret -}}
{{- $_ := set $server "client_tokens_file" "/etc/admit/client-tokens/tokens" -}}
{{- end -}}
{{- if $server -}}
{{- $_ := set $config "server" $server -}}
{{- end -}}
{{- toYaml $config -}}
{{- end -}}

{{/* A probe of path on the HTTP port: HTTPS under TLS, a TCP connection under mutual TLS, which
the kubelet cannot present a certificate to. */}}
{{- define "admit.probe" -}}
{{- if .root.Values.tls.clientCA -}}
tcpSocket:
  port: http
{{- else -}}
httpGet:
  path: {{ .path }}
  port: http
  {{- if .root.Values.tls.enabled }}
  scheme: HTTPS
  {{- end }}
{{- end -}}
{{- end -}}
