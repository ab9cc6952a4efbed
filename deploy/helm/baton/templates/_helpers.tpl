{{/*
The chart's name, and the release's full name (the prefix of every object).
*/}}
{{- define "baton.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "baton.fullname" -}}
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

{{- define "baton.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "baton.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "baton.selectorLabels" -}}
app.kubernetes.io/name: {{ include "baton.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "baton.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "baton.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "baton.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "baton.workspacesClaim" -}}
{{- default (printf "%s-workspaces" (include "baton.fullname" .)) .Values.workspaces.existingClaim }}
{{- end }}

{{/*
Where the chart puts what it owns, inside the image (WORKDIR /data, the
pieces in /data/configs).
*/}}
{{- define "baton.configDir" -}}/etc/baton{{- end }}
{{- define "baton.dataDir" -}}/data/data{{- end }}
{{- define "baton.workspacesDir" -}}/workspaces{{- end }}

{{/*
baton.slack and baton.discord: "true" when the adapter is on, as
config.slack.enabled and config.discord.enabled say.
*/}}
{{- define "baton.slack" -}}
{{- if ((.Values.config | default dict).slack | default dict).enabled }}true{{ end }}
{{- end }}
{{- define "baton.slackMode" -}}
{{- ((.Values.config | default dict).slack | default dict).mode | default "socket" }}
{{- end }}
{{- define "baton.discord" -}}
{{- if ((.Values.config | default dict).discord | default dict).enabled }}true{{ end }}
{{- end }}

{{/*
baton.redisFromSecret: "true" when redis.url is read from secrets.redisUrl
(neither redis.url nor config.redis.cluster_addrs is set).
*/}}
{{- define "baton.redisFromSecret" -}}
{{- if and (not .Values.redis.url) (not (((.Values.config | default dict).redis | default dict).cluster_addrs)) .Values.secrets.redisUrl.key }}true{{ end }}
{{- end }}

{{/*
baton.secretEnv renders one variable read from a Secret:
  include "baton.secretEnv" (list $ "BATON_LLM_API_KEY" .Values.secrets.llmApiKey)
*/}}
{{- define "baton.secretEnv" -}}
{{- $root := index . 0 }}
{{- $ref := index . 2 -}}
- name: {{ index . 1 }}
  valueFrom:
    secretKeyRef:
      name: {{ $ref.name | default $root.Values.secrets.existingSecret | default (include "baton.fullname" $root) | quote }}
      key: {{ $ref.key | quote }}
{{- end }}

{{/*
baton.validate fails the render on values that would put a secret inline,
fight the chart over a key it owns, or leave Baton unable to start. A
message never repeats the value it refuses.
*/}}
{{- define "baton.validate" -}}
{{- $c := .Values.config | default dict }}
{{- $inline := list
      (list "llm" "api_key" "secrets.llmApiKey")
      (list "api" "token" "secrets.apiToken")
      (list "slack" "bot_token" "secrets.slackBotToken")
      (list "slack" "app_token" "secrets.slackAppToken")
      (list "slack" "signing_secret" "secrets.slackSigningSecret")
      (list "discord" "bot_token" "secrets.discordBotToken")
      (list "database" "url" "secrets.databaseUrl")
      (list "redis" "url" "secrets.redisUrl (or redis.url when it holds no password)")
      (list "redis" "cluster_password" "secrets.redisClusterPassword") }}
{{- range $inline }}
{{- if hasKey (index $c (index . 0) | default dict) (index . 1) }}
{{- fail (printf "config.%s.%s: a secret is never written into the chart's values; name a Secret and its key in %s" (index . 0) (index . 1) (index . 2)) }}
{{- end }}
{{- end }}
{{- range list "data_dir" "workspaces.root" "http.addr" "admin.addr" }}
{{- $parts := splitList "." . }}
{{- $set := false }}
{{- if eq (len $parts) 1 }}
{{- $set = hasKey $c . }}
{{- else }}
{{- $set = hasKey (index $c (index $parts 0) | default dict) (index $parts 1) }}
{{- end }}
{{- if $set }}
{{- fail (printf "config.%s: the chart sets it (ports.http, ports.admin, workspaces, dataDir); leave it out of config" .) }}
{{- end }}
{{- end }}
{{- if not .Values.secrets.databaseUrl.key }}
{{- fail "secrets.databaseUrl.key: gateways and workers run as separate pods and need the store on PostgreSQL; name the Secret key holding DATABASE_URL" }}
{{- end }}
{{- if .Values.redis.url }}
{{- if (urlParse .Values.redis.url).userinfo }}
{{- fail "redis.url: it holds credentials; put the URL in a Secret and name it in secrets.redisUrl (leave redis.url empty)" }}
{{- end }}
{{- if ((.Values.config | default dict).redis | default dict).cluster_addrs }}
{{- fail "redis.url and config.redis.cluster_addrs: set one of them" }}
{{- end }}
{{- else if and (not (((.Values.config | default dict).redis | default dict).cluster_addrs)) (not .Values.secrets.redisUrl.key) }}
{{- fail "secrets.redisUrl.key: gateways and workers meet through Redis; name the Secret key holding REDIS_URL, or set redis.url or config.redis.cluster_addrs" }}
{{- end }}
{{- if include "baton.slack" . }}
{{- if not .Values.secrets.slackBotToken.key }}
{{- fail "secrets.slackBotToken.key: config.slack.enabled needs the bot token" }}
{{- end }}
{{- if and (eq (include "baton.slackMode" .) "socket") (not .Values.secrets.slackAppToken.key) }}
{{- fail "secrets.slackAppToken.key: Slack in socket mode needs the app-level token" }}
{{- end }}
{{- if and (eq (include "baton.slackMode" .) "http") (not .Values.secrets.slackSigningSecret.key) }}
{{- fail "secrets.slackSigningSecret.key: Slack in http mode needs the signing secret" }}
{{- end }}
{{- end }}
{{- if and (include "baton.discord" .) (not .Values.secrets.discordBotToken.key) }}
{{- fail "secrets.discordBotToken.key: config.discord.enabled needs the bot token" }}
{{- end }}
{{- if and (eq ((($c.tools | default dict).bash | default dict).sandbox | default "") "bwrap") (not .Values.worker.sandbox.enabled) }}
{{- fail "config.tools.bash.sandbox: bwrap needs worker.sandbox.enabled=true; without it the worker keeps the runtime's default confinement, where bubblewrap cannot run, and would refuse to start" }}
{{- end }}
{{- if not .Values.workspaces.existingClaim }}
{{- if not .Values.workspaces.size }}
{{- fail "workspaces.size: the created claim needs a size (or name workspaces.existingClaim)" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
baton.env is what both Deployments set: the configuration file, the paths
and listeners the chart owns, the store and the queue.
*/}}
{{- define "baton.env" -}}
- name: BATON_CONFIG
  value: {{ printf "%s/baton.yaml" (include "baton.configDir" .) | quote }}
- name: BATON_DATA_DIR
  value: {{ include "baton.dataDir" . | quote }}
- name: BATON_WORKSPACES_ROOT
  value: {{ include "baton.workspacesDir" . | quote }}
- name: BATON_ADMIN_ADDR
  value: {{ printf ":%v" .Values.ports.admin | quote }}
{{ include "baton.secretEnv" (list . "BATON_DATABASE_URL" .Values.secrets.databaseUrl) }}
{{- if .Values.redis.url }}
- name: BATON_REDIS_URL
  value: {{ .Values.redis.url | quote }}
{{- else if include "baton.redisFromSecret" . }}
{{ include "baton.secretEnv" (list . "BATON_REDIS_URL" .Values.secrets.redisUrl) }}
{{- end }}
{{- if and ((.Values.config | default dict).redis | default dict).cluster_addrs .Values.secrets.redisClusterPassword.key }}
{{ include "baton.secretEnv" (list . "BATON_REDIS_CLUSTER_PASSWORD" .Values.secrets.redisClusterPassword) }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
baton.volumes and baton.volumeMounts: the configuration, the pod's own
data_dir and /tmp, and the shared workspaces.
*/}}
{{- define "baton.volumes" -}}
- name: config
  configMap:
    name: {{ include "baton.fullname" . }}
- name: data
  emptyDir:
    {{- with .Values.dataDir.sizeLimit }}
    sizeLimit: {{ . }}
    {{- end }}
- name: tmp
  emptyDir: {}
- name: workspaces
  persistentVolumeClaim:
    claimName: {{ include "baton.workspacesClaim" . }}
{{- end }}

{{- define "baton.volumeMounts" -}}
- name: config
  mountPath: {{ include "baton.configDir" . }}
  readOnly: true
- name: data
  mountPath: {{ include "baton.dataDir" . }}
- name: tmp
  mountPath: /tmp
- name: workspaces
  mountPath: {{ include "baton.workspacesDir" . }}
{{- end }}

{{/*
baton.probes: health and readiness on the admin port. /healthz answers
while the process runs (also while it drains); /readyz is false until the
store and the queue answer and from the moment shutdown begins. The
startup probe gives the store its connect retries before liveness counts.
*/}}
{{- define "baton.probes" -}}
startupProbe:
  httpGet:
    path: /healthz
    port: admin
  periodSeconds: 5
  failureThreshold: 60
livenessProbe:
  httpGet:
    path: /healthz
    port: admin
  periodSeconds: 10
  timeoutSeconds: 3
  failureThreshold: 3
readinessProbe:
  httpGet:
    path: /readyz
    port: admin
  periodSeconds: 10
  timeoutSeconds: 3
  failureThreshold: 2
{{- end }}
