{{/* Chart name. */}}
{{- define "agent.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Full name: the release name when it already contains the chart name, else release-chart. */}}
{{- define "agent.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "agent.selectorLabels" -}}
app.kubernetes.io/name: {{ include "agent.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "agent.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "agent.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: agent
app.kubernetes.io/part-of: karmada
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.labels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "agent.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "agent.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The cluster name, required by both targets. */}}
{{- define "agent.clusterName" -}}
{{- required "clusterName is required (--cluster-name)" .Values.clusterName -}}
{{- end -}}

{{- define "agent.member" -}}
{{- if eq .Values.target "memberCluster" }}true{{ end -}}
{{- end -}}

{{- define "agent.kubeconfigSecretName" -}}
{{- default (printf "%s-kubeconfig" (include "agent.fullname" .)) .Values.karmadaKubeconfig.existingSecret -}}
{{- end -}}

{{/* The agent's user on the Karmada API server. */}}
{{- define "agent.karmadaUser" -}}
{{- default (printf "system:karmada:agent:%s" (include "agent.clusterName" .)) .Values.karmadaIdentity.user -}}
{{- end -}}

{{/*
The agent's arguments. tests/tests/integration/agent_deployments.rs runs the rendered container as written
(tests/src/pod_run.rs: $(POD_IP) is the pod's own address, only mount paths are rewritten).
*/}}
{{- define "agent.args" -}}
- --karmada-kubeconfig=/etc/karmada/kubeconfig/{{ .Values.karmadaKubeconfig.secretKey }}
{{- with .Values.karmadaKubeconfig.context }}
- --karmada-context={{ . }}
{{- end }}
- --cluster-name={{ include "agent.clusterName" . }}
- --cluster-namespace={{ .Values.clusterNamespace }}
{{- with .Values.clusterApiEndpoint }}
- --cluster-api-endpoint={{ . }}
{{- end }}
{{- with .Values.clusterProvider }}
- --cluster-provider={{ . }}
{{- end }}
{{- with .Values.clusterRegion }}
- --cluster-region={{ . }}
{{- end }}
{{- with .Values.clusterZones }}
- --cluster-zones={{ join "," . }}
{{- end }}
- --leader-elect={{ .Values.leaderElection.enabled }}
- --leader-elect-resource-namespace={{ .Values.leaderElection.namespace }}
- --leader-elect-lease-duration={{ .Values.leaderElection.leaseDuration }}
- --leader-elect-renew-deadline={{ .Values.leaderElection.renewDeadline }}
- --leader-elect-retry-period={{ .Values.leaderElection.retryPeriod }}
- --metrics-bind-address=$(POD_IP):{{ .Values.metrics.port | int }}
- --health-probe-bind-address=$(POD_IP):{{ .Values.healthProbe.port | int }}
{{- with .Values.controllers }}
- --controllers={{ join "," . }}
{{- end }}
{{- with .Values.featureGates }}
{{- $gates := list }}
{{- range $name, $on := . }}
{{- $gates = append $gates (printf "%s=%t" $name $on) }}
{{- end }}
- --feature-gates={{ join "," $gates }}
{{- end }}
- --concurrent-work-syncs={{ .Values.workSyncs | int }}
- --kube-api-qps={{ .Values.kubeAPI.qps }}
- --kube-api-burst={{ .Values.kubeAPI.burst | int }}
- --cluster-api-qps={{ .Values.clusterAPI.qps }}
- --cluster-api-burst={{ .Values.clusterAPI.burst | int }}
- --cluster-status-update-frequency={{ .Values.clusterStatusUpdateFrequency }}
- --cluster-lease-duration={{ .Values.clusterLease.duration }}
- --cluster-lease-renew-interval-fraction={{ .Values.clusterLease.renewIntervalFraction }}
- --enable-cluster-resource-modeling={{ .Values.enableClusterResourceModeling }}
- --report-secrets=None
- --v={{ .Values.log.verbosity | int }}
- --logging-format={{ .Values.log.format }}
{{- range .Values.extraArgs }}
- {{ . }}
{{- end }}
{{- end -}}

{{/*
"true" when this release renders the karmada-agent-restriction policy: it is enabled and no other
installer owns it yet. The policy is cluster-scoped and shared by every agent (this chart, the other
Karmada chart and karmadactl register install the same file), so whoever installed it first keeps it
and a later release leaves it alone instead of failing on Helm's ownership check. helm template (no
cluster to look up) always renders it.
*/}}
{{- define "agent.renderAgentRestriction" -}}
{{- if .Values.agentRestriction.install -}}
{{- $existing := lookup "admissionregistration.k8s.io/v1" "ValidatingAdmissionPolicy" "" "karmada-agent-restriction" -}}
{{- if not $existing -}}
true
{{- else -}}
{{- $annotations := ($existing.metadata).annotations | default dict -}}
{{- if and (eq (get $annotations "meta.helm.sh/release-name") .Release.Name) (eq (get $annotations "meta.helm.sh/release-namespace") .Release.Namespace) -}}
true
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
