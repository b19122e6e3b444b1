{{/*
Shared pieces. Object names, label keys and the Service name are the public names of
docs/design.md ("The Kubernetes contract"): they do not depend on the release name, so a
cluster runs one erdma-controller, as with manifests/.
*/}}

{{/* The namespace every object goes to. */}}
{{- define "erdma.namespace" -}}
{{ .Values.namespace.name }}
{{- end }}

{{/* Labels helm adds to every object's metadata (not to pod templates or selectors, which
stay as manifests/ has them, so switching between the two never changes a selector). */}}
{{- define "erdma.helmLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* An image reference from {image: <webhook.image or agent.image>, appVersion}. */}}
{{- define "erdma.image" -}}
{{- $repo := .image.repository -}}
{{- if .image.registry -}}
{{- $repo = printf "%s/%s" (trimSuffix "/" .image.registry) .image.repository -}}
{{- end -}}
{{- if .image.digest -}}
{{ printf "%s@%s" $repo .image.digest }}
{{- else -}}
{{ printf "%s:%s" $repo (.image.tag | default .appVersion) }}
{{- end -}}
{{- end }}

{{/* The namespaces the webhook leaves alone: webhook.excludedNamespaces plus the install
namespace, as a YAML list. The same list goes into the namespaceSelector and the config. */}}
{{- define "erdma.excludedNamespaces" -}}
{{- $list := concat .Values.webhook.excludedNamespaces (list (include "erdma.namespace" .)) | uniq -}}
{{ toYaml $list }}
{{- end }}

{{/* The webhook's config.yaml. */}}
{{- define "erdma.webhookConfig" -}}
{{- if hasKey .Values.webhook.config "excludedNamespaces" -}}
{{- fail "webhook.config.excludedNamespaces: set webhook.excludedNamespaces instead (the chart keeps the config and the webhook configuration's namespaceSelector in step)" -}}
{{- end -}}
{{- $cfg := deepCopy .Values.webhook.config -}}
{{- $_ := set $cfg "excludedNamespaces" (include "erdma.excludedNamespaces" . | fromYamlArray) -}}
{{ toYaml $cfg }}
{{- end }}

{{/* The agent's config.yaml: agent.config with metricsListen and nfdFeatureFile from their own
values. */}}
{{- define "erdma.agentConfig" -}}
{{- range $key := list "metricsListen" "nfdFeatureFile" -}}
{{- if hasKey $.Values.agent.config $key -}}
{{- fail (printf "agent.config.%s: set %s instead" $key (ternary "agent.metricsListen" "agent.nfd.enabled and agent.nfd.featureFile" (eq $key "metricsListen"))) -}}
{{- end -}}
{{- end -}}
{{- $cfg := deepCopy .Values.agent.config -}}
{{- $_ := set $cfg "metricsListen" .Values.agent.metricsListen -}}
{{- $_ := set $cfg "nfdFeatureFile" (ternary .Values.agent.nfd.featureFile "" .Values.agent.nfd.enabled) -}}
{{ toYaml $cfg }}
{{- end }}

{{/* agent.metricsListen split into host and port: {host: "127.0.0.1", port: 9467}; host is ""
for a wildcard address, where kubelet's probes go to the pod's (the node's) IP instead. */}}
{{- define "erdma.agentMetrics" -}}
{{- $addr := .Values.agent.metricsListen -}}
{{- $port := regexFind "[0-9]+$" $addr -}}
{{- $host := trimSuffix (printf ":%s" $port) $addr | trimPrefix "[" | trimSuffix "]" -}}
{{- if has $host (list "" "0.0.0.0" "::") -}}
{{- $host = "" -}}
{{- end -}}
host: {{ $host | quote }}
port: {{ $port }}
{{- end }}

{{/* The DRA driver's settings as the agent reads them from its config (agent.config.dra),
with the agent's defaults for the keys left out: {enabled, driverName, registryDir, pluginDir,
cdiDir, hookDir} (hookDir "" = no CDI hook). The RBAC, the DeviceClasses and the DaemonSet's host directories follow them. */}}
{{- define "erdma.dra" -}}
{{- $dra := .Values.agent.config.dra | default dict -}}
{{- if and $dra.extendedResource (not $dra.enabled) -}}
{{- fail "agent.config.dra.extendedResource: needs agent.config.dra.enabled: true (without the DRA driver nothing would serve the resource)" -}}
{{- end -}}
enabled: {{ $dra.enabled | default false }}
driverName: {{ $dra.driverName | default "erdma.aliyun.com" | quote }}
registryDir: {{ $dra.registryDir | default "/var/lib/kubelet/plugins_registry" | trimSuffix "/" | quote }}
pluginDir: {{ $dra.pluginDir | default "/var/lib/kubelet/plugins" | trimSuffix "/" | quote }}
cdiDir: {{ $dra.cdiDir | default "/var/run/cdi" | trimSuffix "/" | quote }}
hookDir: {{ if hasKey $dra "hookDir" }}{{ $dra.hookDir | trimSuffix "/" | quote }}{{ else }}"/var/lib/erdma-controller/dra"{{ end }}
{{- end }}
