{{/* bex.fullname is the prefix of every object's name. */}}
{{- define "bex.fullname" -}}
{{- if contains "bex" .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "bex-%s" .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* bex.name gives a component's object name: (dict "root" $ "component" "edge"). */}}
{{- define "bex.name" -}}
{{- printf "%s-%s" (include "bex.fullname" .root) .component -}}
{{- end -}}

{{/* bex.selectorLabels select a component's pods. */}}
{{- define "bex.selectorLabels" -}}
app.kubernetes.io/name: bex
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* bex.labels are on every object of a component. */}}
{{- define "bex.labels" -}}
{{ include "bex.selectorLabels" . }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end -}}

{{/* bex.image is registry/repository:tag of (dict "root" $ "image" .Values.x.image). */}}
{{- define "bex.image" -}}
{{- $tag := default .root.Chart.AppVersion .image.tag -}}
{{- if contains "/" .image.repository -}}
{{- printf "%s:%s" .image.repository $tag -}}
{{- else -}}
{{- printf "%s/%s:%s" .root.Values.global.imageRegistry .image.repository $tag -}}
{{- end -}}
{{- end -}}

{{/* bex.podSecurity is the pod-level securityContext of bex's own components. */}}
{{- define "bex.podSecurity" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* bex.containerSecurity is the container securityContext of bex's own components. */}}
{{- define "bex.containerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end -}}

{{/* bex.databaseEnv is DATABASE_URL from the Postgres Secret. */}}
{{- define "bex.databaseEnv" -}}
- name: DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ .Values.postgres.existingSecret }}
      key: {{ .Values.postgres.urlKey }}
{{- end -}}

{{/* bex.podSpecCommon: service account, pull secrets. Argument: (dict "root" $ "component" "x"). */}}
{{- define "bex.podSpecCommon" -}}
serviceAccountName: {{ include "bex.name" . }}
{{- with .root.Values.global.imagePullSecrets }}
imagePullSecrets:
{{- range . }}
  - name: {{ . }}
{{- end }}
{{- end }}
{{- end -}}

{{/* NetworkPolicy egress and ingress rules shared by the components. */}}
{{- define "bex.np.kubeAPI" -}}
# the Kubernetes API (this cluster's, and the workload clusters')
- to:
  {{- range .Values.networkPolicies.apiServerCIDRs }}
    - ipBlock: {cidr: {{ . }}}
  {{- end }}
  ports:
    - {port: 443, protocol: TCP}
    - {port: 6443, protocol: TCP}
{{- end -}}
{{- define "bex.np.postgres" -}}
# the external Postgres
- to:
  {{- range .Values.networkPolicies.postgresCIDRs }}
    - ipBlock: {cidr: {{ . }}}
  {{- end }}
  ports:
    - {port: {{ .Values.networkPolicies.postgresPort }}, protocol: TCP}
{{- end -}}
{{- define "bex.np.dns" -}}
# cluster DNS
- to:
    - namespaceSelector: {}
  ports:
    - {port: 53, protocol: UDP}
    - {port: 53, protocol: TCP}
{{- end -}}
{{- define "bex.np.metricsIngress" -}}
# Prometheus, from any namespace, on the metrics port only
- from:
    - namespaceSelector: {}
  ports:
    - {port: metrics, protocol: TCP}
{{- end -}}

{{/* bex.runtimeArgs are the releaser's flags (cmd/internal/workload.Options),
   shared by the controller manager, web and the git receiver. A missing
   registry or domain is left out: the binaries then refuse to start and
   say which flag is missing (NOTES.txt warns too). */}}
{{- define "bex.runtimeArgs" -}}
- --work-dir=/var/lib/bex/work
- --release-retention={{ .Values.releaseRetention | int }}
{{- with .Values.registry }}
- --registry={{ . }}
{{- end }}
{{- with .Values.domain }}
- --app-domain={{ . }}
{{- end }}
{{- if .Values.workloadCluster.kubeconfigSecret }}
- --workload-kubeconfig=/etc/bex/workload/{{ .Values.workloadCluster.kubeconfigKey }}
{{- end }}
{{- include "bex.tenantArgs" . }}
{{- include "bex.followPlacementArgs" . }}
{{- end -}}

{{/* bex.followPlacementArgs: with followPlacement.enabled, each app runs
   (and is routed) where the scheduler placed it, reached through the
   runtime kubeconfigs Secret; the same for the four processes. */}}
{{- define "bex.followPlacementArgs" -}}
{{- with .Values.followPlacement }}
{{- if .enabled }}
- --follow-placement
- --runtime-kubeconfigs-secret={{ $.Release.Namespace }}/{{ required "followPlacement.runtimeKubeconfigsSecret is required with followPlacement.enabled" .runtimeKubeconfigsSecret }}
{{- with .fleetNamespace }}
- --fleet-namespace={{ . }}
{{- end }}
{{- with .localCluster.name }}
{{- if $.Values.workloadCluster.kubeconfigSecret }}
{{- fail "followPlacement.localCluster.name makes this cluster one of the fleet, but workloadCluster.kubeconfigSecret sends its apps to another cluster, which this chart's edge does not route to: leave one of them empty" }}
{{- end }}
- --workload-cluster={{ . }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{/* bex.localClusterArg: bex-apiserver's --local-cluster for this cluster
   when followPlacement.localCluster names it. */}}
{{- define "bex.localClusterArg" -}}
{{- with .Values.followPlacement }}
{{- if and .enabled .localCluster.name }}
- --local-cluster={{ .localCluster.name }}:{{ required "followPlacement.localCluster.capacity is required with its name: what apps may use of this cluster, cpu=…,memory=…,pods=…" .localCluster.capacity }}{{ if .localCluster.standby }},standby{{ end }}
{{- end }}
{{- end }}
{{- end -}}

{{/* bex.quotaArgs: every tenant's default quotas (values quotas.*), the
   same for web and the git receiver, which check different ones. */}}
{{- define "bex.quotaArgs" -}}
- --quota-apps={{ .Values.quotas.apps | int64 }}
- --quota-routes={{ .Values.quotas.routes | int64 }}
- --quota-concurrent-builds={{ .Values.quotas.concurrentBuilds | int64 }}
- --quota-repo-bytes={{ .Values.quotas.repoBytes | int64 }}
- --quota-build-minutes={{ .Values.quotas.buildMinutes | int64 }}
- --quota-concurrent-runs={{ .Values.quotas.concurrentRuns | int64 }}
- --quota-instances={{ .Values.quotas.instances | int64 }}
- --quota-cpu={{ .Values.quotas.cpu }}
- --quota-memory={{ .Values.quotas.memory }}
{{- end -}}

{{/* bex.tenantArgs: what the kube driver keeps in every tenant namespace
   (docs/security.md, "Cluster mode"): the NetworkPolicy's peers, and the
   roles bound there to the git receiver. Every process that runs the
   driver gets the same, so that they never fight over the objects. */}}
{{- define "bex.tenantArgs" -}}
{{- $local := not .Values.workloadCluster.kubeconfigSecret }}
{{- if and $local .Values.edge.enabled }}
- --tenant-ingress-namespace={{ .Release.Namespace }}
- --tenant-ingress-pod-labels=app.kubernetes.io/name=bex,app.kubernetes.io/instance={{ .Release.Name }},app.kubernetes.io/component=edge
{{- end }}
{{- with .Values.tenantNetwork.ingressCIDRs }}
- --tenant-ingress-cidrs={{ join "," . }}
{{- end }}
{{- with .Values.tenantNetwork.egressCIDRs }}
- --tenant-egress-cidrs={{ join "," . }}
{{- end }}
{{- if .Values.gitReceiver.builds.inPods }}
- --build-ingress-namespace={{ .Release.Namespace }}
- --build-ingress-pod-labels=app.kubernetes.io/name=bex,app.kubernetes.io/instance={{ .Release.Name }},app.kubernetes.io/component=git-receiver
{{- with .Values.gitReceiver.builds.egressCIDRs }}
- --build-egress-cidrs={{ join "," . }}
{{- end }}
{{- with .Values.gitReceiver.builds.egressExceptCIDRs }}
- --build-egress-except-cidrs={{ join "," . }}
{{- end }}
{{- end }}
- --tenant-config-role={{ include "bex.name" (dict "root" . "component" "tenant-config") }}
{{- if $local }}
- --tenant-role={{ include "bex.name" (dict "root" . "component" "tenant-runtime") }}
{{- end }}
- --tenant-role-service-accounts={{ .Release.Namespace }}/{{ include "bex.name" (dict "root" . "component" "git-receiver") }}
{{- end -}}

{{/* bex.runtimeEnv: DATABASE_URL, a writable HOME for git, and the
   registry's credentials as a docker configuration. */}}
{{- define "bex.runtimeEnv" -}}
{{ include "bex.databaseEnv" . }}
- name: HOME
  value: /tmp
{{- if .Values.registryCredentials.existingSecret }}
- name: DOCKER_CONFIG
  value: /etc/bex/registry
{{- end }}
{{- end -}}

{{/* bex.runtimeVolumeMounts: the pipeline's scratch directory, /tmp and the
   workload cluster's kubeconfig. */}}
{{- define "bex.runtimeVolumeMounts" -}}
- name: work
  mountPath: /var/lib/bex/work
- name: tmp
  mountPath: /tmp
{{- if .Values.workloadCluster.kubeconfigSecret }}
- name: workload-kubeconfig
  mountPath: /etc/bex/workload
  readOnly: true
{{- end }}
{{- if .Values.registryCredentials.existingSecret }}
- name: registry-credentials
  mountPath: /etc/bex/registry
  readOnly: true
{{- end }}
{{- end -}}

{{- define "bex.runtimeVolumes" -}}
- name: work
  emptyDir: {}
- name: tmp
  emptyDir: {}
{{- with .Values.workloadCluster.kubeconfigSecret }}
- name: workload-kubeconfig
  secret:
    secretName: {{ . }}
{{- end }}
{{- with .Values.registryCredentials.existingSecret }}
- name: registry-credentials
  secret:
    secretName: {{ . }}
    items:
      - key: .dockerconfigjson
        path: config.json
{{- end }}
{{- end -}}

{{- define "bex.np.registry" -}}
# the image registry (app images pushed, or read back at release)
- ports:
  {{- range .Values.networkPolicies.registryPorts }}
    - {port: {{ . }}, protocol: TCP}
  {{- end }}
{{- end -}}

{{/* bex.reservedHostnameArgs: the names the platform serves itself, which no
   Route may claim (docs/security.md, "Domains"): the registry's host, the
   git receiver's public host and reservedHostnames, without ports. The
   controller manager and web get the same list. */}}
{{- define "bex.reservedHostnameArgs" -}}
{{- $names := list }}
{{- with .Values.registry }}
{{- $names = append $names (regexReplaceAll "/.*$" . "") }}
{{- end }}
{{- with .Values.gitReceiver.publicURL }}
{{- $names = append $names (urlParse .).host }}
{{- end }}
{{- $names = concat $names .Values.reservedHostnames }}
{{- $hosts := list }}
{{- range $names }}
{{- $hosts = append $hosts (regexReplaceAll ":[0-9]+$" . "") }}
{{- end }}
{{- range $hosts | compact | uniq }}
- --reserved-hostname={{ . }}
{{- end }}
{{- end -}}

{{/* bex.appMetricsTokenSecret is the Secret whose "token" opens the edges'
   per-app request counts (bex-edge --app-metrics-token-file, bex-web
   --edge-metrics-token-file). */}}
{{- define "bex.appMetricsTokenSecret" -}}
{{- .Values.edge.appMetricsTokenSecret | default (include "bex.name" (dict "root" . "component" "app-metrics-token")) -}}
{{- end -}}
