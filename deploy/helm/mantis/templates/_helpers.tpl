{{/* Names, labels and the pieces every Mantis pod shares. */}}

{{- define "mantis.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's full name, at most 40 characters so that "<fullname>-agent-<target>-tls" and friends stay valid. */}}
{{- define "mantis.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "mantis.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Selector labels of one component: (dict "root" $ "component" "mandible"). */}}
{{- define "mantis.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mantis.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "mantis.labels" -}}
helm.sh/chart: {{ include "mantis.chart" .root }}
{{ include "mantis.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: mantis
{{- end }}

{{- define "mantis.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "mantis.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "mantis.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "mantis.agentImage" -}}
{{- printf "%s:%s" .Values.agentImage.repository (default .Chart.AppVersion .Values.agentImage.tag) }}
{{- end }}

{{- define "mantis.secretsName" -}}
{{- default (include "mantis.fullname" .) .Values.secrets.name }}
{{- end }}

{{/* One secrets.* item as the file "path" of the projected volume "secrets": (dict "root" $ "item" .Values.secrets.databaseURL "path" "database-url"). */}}
{{- define "mantis.secretProjection" -}}
- secret:
    name: {{ default (include "mantis.secretsName" .root) .item.secret }}
    items:
      - key: {{ .item.key }}
        path: {{ .path }}
{{- end }}

{{/* A Secret volume holding one secrets.* item as the file "name": (dict "root" $ "item" ... "volume" "tokens" "file" "tokens.toml"). */}}
{{- define "mantis.secretFileVolume" -}}
- name: {{ .volume }}
  secret:
    secretName: {{ default (include "mantis.secretsName" .root) .item.secret }}
    defaultMode: 0440
    items:
      - key: {{ .item.key }}
        path: {{ .file }}
{{- end }}

{{- define "mantis.mandible.tlsSecret" -}}
{{- default (printf "%s-mandible-tls" (include "mantis.fullname" .)) .Values.tls.mandible.secretName }}
{{- end }}

{{- define "mantis.thorax.tlsSecret" -}}
{{- default (printf "%s-thorax-tls" (include "mantis.fullname" .)) .Values.tls.thorax.secretName }}
{{- end }}

{{/* An agent target's TLS Secret: (dict "root" $ "target" .). */}}
{{- define "mantis.agent.tlsSecret" -}}
{{- default (printf "%s-agent-%s-tls" (include "mantis.fullname" .root) .target.name) (get .target "secretName") }}
{{- end }}

{{/* The names each component's identity carries: spiffe://mantis/<role>/<name>. */}}
{{- define "mantis.mandible.identity" -}}
{{- printf "spiffe://mantis/mandible/%s-mandible" (include "mantis.fullname" .) }}
{{- end }}

{{- define "mantis.thorax.identity" -}}
{{- printf "spiffe://mantis/thorax/%s-thorax" (include "mantis.fullname" .) }}
{{- end }}

{{/* The DNS names of a component's Service: (dict "root" $ "component" "mandible" "extra" list). */}}
{{- define "mantis.serviceDNSNames" -}}
{{- $svc := printf "%s-%s" (include "mantis.fullname" .root) .component }}
- {{ $svc }}
- {{ $svc }}.{{ .root.Release.Namespace }}
- {{ $svc }}.{{ .root.Release.Namespace }}.svc
- {{ $svc }}.{{ .root.Release.Namespace }}.svc.cluster.local
{{- range .extra }}
- {{ . }}
{{- end }}
{{- end }}

{{/* The TLS volume every Mantis pod mounts at /etc/mantis/tls: its own pair and the CA. */}}
{{- define "mantis.tlsVolume" -}}
- name: tls
  secret:
    secretName: {{ .secretName }}
    defaultMode: 0440
    items:
      - {key: tls.crt, path: tls.crt}
      - {key: tls.key, path: tls.key}
      - {key: ca.crt, path: ca.crt}
{{- end }}

{{/* The broker's CA volume, when rabbitmq.caSecret names one. */}}
{{- define "mantis.rabbitmqCAVolume" -}}
{{- if and .Values.rabbitmq.enabled .Values.rabbitmq.caSecret.name }}
- name: rabbitmq-ca
  secret:
    secretName: {{ .Values.rabbitmq.caSecret.name }}
    defaultMode: 0440
    items:
      - key: {{ .Values.rabbitmq.caSecret.key }}
        path: ca.crt
{{- end }}
{{- end }}

{{- define "mantis.rabbitmqCAMount" -}}
{{- if and .Values.rabbitmq.enabled .Values.rabbitmq.caSecret.name }}
- {name: rabbitmq-ca, mountPath: /etc/mantis/rabbitmq, readOnly: true}
{{- end }}
{{- end }}

{{/* The [queue] section shared by Mandible and Thorax: (dict "root" $ "username" "..."). */}}
{{- define "mantis.queueConfig" -}}
{{- $r := .root.Values.rabbitmq }}
[queue]
enabled = {{ $r.enabled }}
{{- if $r.enabled }}
host = {{ $r.host | quote }}
port = {{ $r.port }}
username = {{ .username | quote }}
password_file = "/etc/mantis/secrets/queue-password"
vhost = {{ $r.vhost | quote }}
ca_cert_path = {{ ternary "/etc/mantis/rabbitmq/ca.crt" "/etc/mantis/tls/ca.crt" (ne $r.caSecret.name "") | quote }}
{{- if $r.clientCertificate }}
client_cert_path = "/etc/mantis/tls/tls.crt"
client_key_path = "/etc/mantis/tls/tls.key"
{{- end }}
{{- end }}
{{- end }}

{{/* The [log] section of every process. */}}
{{- define "mantis.logConfig" -}}
[log]
level = {{ .Values.log.level | quote }}
format = {{ .Values.log.format | quote }}
{{- end }}

{{/* The port of a host:port address. */}}
{{- define "mantis.port" -}}
{{- regexReplaceAll "^.*:" . "" }}
{{- end }}

{{/* The volumes every Mantis pod has: /tmp. */}}
{{- define "mantis.tmpVolume" -}}
- name: tmp
  emptyDir:
    sizeLimit: 64Mi
{{- end }}

{{/* Pod-level settings shared by every component: (dict "root" $ "values" .Values.mandible). */}}
{{- define "mantis.podSpecCommon" -}}
serviceAccountName: {{ include "mantis.serviceAccountName" .root }}
automountServiceAccountToken: false
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .root.Values.podSecurityContext | nindent 2 }}
{{- with .values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* Temporal's CA and client pair, projected into one directory. */}}
{{- define "mantis.temporalTLSVolume" -}}
{{- $t := .Values.temporal.tls }}
{{- if and $t.enabled (or $t.caSecret.name $t.clientSecret) }}
- name: temporal-tls
  projected:
    defaultMode: 0440
    sources:
      {{- if $t.caSecret.name }}
      - secret:
          name: {{ $t.caSecret.name }}
          items:
            - {key: {{ $t.caSecret.key }}, path: ca.crt}
      {{- end }}
      {{- if $t.clientSecret }}
      - secret:
          name: {{ $t.clientSecret }}
          items:
            - {key: tls.crt, path: tls.crt}
            - {key: tls.key, path: tls.key}
      {{- end }}
{{- end }}
{{- end }}

{{/* The issuer, lifetime and key of every cert-manager Certificate. */}}
{{- define "mantis.certificateCommon" -}}
{{- $cm := .Values.certManager -}}
duration: {{ $cm.duration }}
renewBefore: {{ $cm.renewBefore }}
privateKey:
  algorithm: {{ $cm.privateKey.algorithm }}
  size: {{ $cm.privateKey.size }}
  rotationPolicy: Always
issuerRef:
  name: {{ $cm.issuerRef.name }}
  kind: {{ $cm.issuerRef.kind }}
  group: {{ $cm.issuerRef.group }}
{{- end }}

{{/* One egress rule: (dict "to" peers "ports" ports); no peers means any destination. */}}
{{- define "mantis.egressRule" -}}
- {{- with .to }}
  to:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  ports:
    {{- toYaml .ports | nindent 4 }}
{{- end }}

{{/* The metrics port's ingress rule, from networkPolicy.metricsFrom (anyone when empty). */}}
{{- define "mantis.metricsIngress" -}}
- {{- with .metricsFrom }}
  from:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  ports:
    - {port: metrics, protocol: TCP}
{{- end }}
