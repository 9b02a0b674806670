{{/* Chart name. */}}
{{- define "kcm.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Full name: the release name when it already contains the chart name, else release-chart. */}}
{{- define "kcm.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "kcm.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kcm.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "kcm.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "kcm.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: controller-manager
app.kubernetes.io/part-of: karmada
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.labels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "kcm.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "kcm.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "kcm.inCluster" -}}
{{- if eq .Values.karmadaApiServer.mode "inCluster" }}true{{ end -}}
{{- end -}}

{{/* Namespace of the leader-election Lease. */}}
{{- define "kcm.leaseNamespace" -}}
{{- if .Values.leaderElection.namespace -}}
{{- .Values.leaderElection.namespace -}}
{{- else if include "kcm.inCluster" . -}}
{{- .Release.Namespace -}}
{{- else -}}
karmada-system
{{- end -}}
{{- end -}}

{{- define "kcm.kubeconfigSecretName" -}}
{{- default (printf "%s-kubeconfig" (include "kcm.fullname" .)) .Values.karmadaApiServer.kubeconfig.existingSecret -}}
{{- end -}}

{{/*
The controller-manager's arguments. tests/tests/integration/chart.rs runs the installed container as written
(tests/src/pod_run.rs: $(POD_IP) is the pod's own address, only mount paths are rewritten).
*/}}
{{- define "kcm.args" -}}
{{- if not (include "kcm.inCluster" .) }}
- --kubeconfig=/etc/karmada/kubeconfig/{{ .Values.karmadaApiServer.kubeconfig.secretKey }}
{{- end }}
- --leader-elect={{ .Values.leaderElection.enabled }}
- --leader-elect-resource-namespace={{ include "kcm.leaseNamespace" . }}
- --leader-elect-lease-duration={{ .Values.leaderElection.leaseDuration }}
- --leader-elect-renew-deadline={{ .Values.leaderElection.renewDeadline }}
- --leader-elect-retry-period={{ .Values.leaderElection.retryPeriod }}
- --metrics-bind-address=$(POD_IP):{{ .Values.metrics.port | int }}
- --health-probe-bind-address=$(POD_IP):{{ .Values.healthProbe.port | int }}
{{- if .Values.profiling.enabled }}
- --enable-pprof=true
- --profiling-bind-address=127.0.0.1:{{ .Values.profiling.port | int }}
{{- end }}
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
- --concurrent-cluster-syncs={{ .Values.concurrency.clusterSyncs | int }}
- --concurrent-clusterresourcebinding-syncs={{ .Values.concurrency.clusterResourceBindingSyncs | int }}
- --concurrent-resourcebinding-syncs={{ .Values.concurrency.resourceBindingSyncs | int }}
- --concurrent-work-syncs={{ .Values.concurrency.workSyncs | int }}
- --concurrent-namespace-syncs={{ .Values.concurrency.namespaceSyncs | int }}
- --concurrent-propagation-policy-syncs={{ .Values.concurrency.propagationPolicySyncs | int }}
- --concurrent-cluster-propagation-policy-syncs={{ .Values.concurrency.clusterPropagationPolicySyncs | int }}
- --concurrent-resource-template-syncs={{ .Values.concurrency.resourceTemplateSyncs | int }}
- --concurrent-dependent-resource-syncs={{ .Values.concurrency.dependentResourceSyncs | int }}
- --kube-api-qps={{ .Values.kubeAPI.qps }}
- --kube-api-burst={{ .Values.kubeAPI.burst | int }}
- --cluster-api-qps={{ .Values.clusterAPI.qps }}
- --cluster-api-burst={{ .Values.clusterAPI.burst | int }}
- --cluster-status-update-frequency={{ .Values.clusterStatusUpdateFrequency }}
- --v={{ .Values.log.verbosity | int }}
- --logging-format={{ .Values.log.format }}
{{- with .Values.scheduler.name }}
- --scheduler-name={{ . }}
{{- end }}
{{- with .Values.scheduler.plugins }}
- --plugins={{ join "," . }}
{{- end }}
{{- $estimator := .Values.scheduler.estimator }}
{{- if $estimator.enabled }}
- --enable-scheduler-estimator=true
{{- end }}
{{- if $estimator.disableInPullMode }}
- --disable-scheduler-estimator-in-pull-mode=true
{{- end }}
{{- with $estimator.timeout }}
- --scheduler-estimator-timeout={{ . }}
{{- end }}
{{- if not (kindIs "invalid" $estimator.port) }}
- --scheduler-estimator-port={{ $estimator.port | int }}
{{- end }}
{{- with $estimator.serviceNamespace }}
- --scheduler-estimator-service-namespace={{ . }}
{{- end }}
{{- with $estimator.servicePrefix }}
- --scheduler-estimator-service-prefix={{ . }}
{{- end }}
{{- $tlsDir := ternary "/etc/karmada/scheduler-estimator-tls/" "" (ne $estimator.tls.existingSecret "") }}
{{- with $estimator.tls.caFile }}
- --scheduler-estimator-ca-file={{ $tlsDir }}{{ . }}
{{- end }}
{{- with $estimator.tls.certFile }}
- --scheduler-estimator-cert-file={{ $tlsDir }}{{ . }}
{{- end }}
{{- with $estimator.tls.keyFile }}
- --scheduler-estimator-key-file={{ $tlsDir }}{{ . }}
{{- end }}
{{- if $estimator.tls.insecureSkipVerify }}
- --insecure-skip-estimator-verify=true
{{- end }}
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
{{- define "kcm.renderAgentRestriction" -}}
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

{{/*
"true" when this release renders the Cluster CRD (files/crds/cluster.karmada.io_clusters.yaml):
clusterCRD.install is on and no other installer owns the CRD yet (an earlier version of this chart
installed it from crds/, or another release did), as for the agent restriction policy above. Fails
when the APIService v1alpha1.cluster.karmada.io sends cluster.karmada.io to a Service (Karmada's
karmada-aggregated-apiserver): the CRD would claim the same group. helm template (no cluster to look
up) always renders it.
*/}}
{{- define "kcm.renderClusterCRD" -}}
{{- if and (include "kcm.inCluster" .) .Values.clusterCRD.install -}}
{{- $apiService := lookup "apiregistration.k8s.io/v1" "APIService" "" "v1alpha1.cluster.karmada.io" -}}
{{- $service := dig "spec" "service" dict $apiService -}}
{{- if $service -}}
{{- fail (printf "clusterCRD.install is true, but the APIService v1alpha1.cluster.karmada.io already serves cluster.karmada.io from the Service %s/%s (Karmada's karmada-aggregated-apiserver): the Cluster CRD would claim the same group. Install with --set clusterCRD.install=false; the controller-manager uses the Clusters that server serves." (get $service "namespace") (get $service "name")) -}}
{{- end -}}
{{- $existing := lookup "apiextensions.k8s.io/v1" "CustomResourceDefinition" "" "clusters.cluster.karmada.io" -}}
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

{{/*
"true" when this release renders the admission policy .name (dict "root" . "name" <name>): no other
installer owns it yet. `kubectl apply -f crds/` installs the same policies, and a release must not fail
Helm's ownership check on them; helm template (no cluster to look up) always renders it.
*/}}
{{- define "kcm.renderAdmissionPolicy" -}}
{{- $root := .root -}}
{{- $existing := lookup "admissionregistration.k8s.io/v1" "ValidatingAdmissionPolicy" "" .name -}}
{{- if not $existing -}}
true
{{- else -}}
{{- $annotations := ($existing.metadata).annotations | default dict -}}
{{- if and (eq (get $annotations "meta.helm.sh/release-name") $root.Release.Name) (eq (get $annotations "meta.helm.sh/release-namespace") $root.Release.Namespace) -}}
true
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The PromQL label matcher that selects this release's metrics in the dashboard and alerts. */}}
{{- define "kcm.monitoringSelector" -}}
{{- .Values.monitoring.selector | default (printf "job=\"%s-metrics\"" (include "kcm.fullname" .)) -}}
{{- end -}}
