{{/* Names, labels and the values the chart derives. */}}

{{- define "levee.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
levee.fullname names every object; at most 52 characters, because the
StatefulSet controller labels each pod with the StatefulSet's name, "-" and
a revision hash of up to 10 characters, a label value of at most 63. The
headless Service appends "-headless" to it (61 at most), so a long name
cut short never gives two Services one name.
*/}}
{{- define "levee.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "levee.headless" -}}
{{- printf "%s-headless" (include "levee.fullname" .) -}}
{{- end -}}

{{- define "levee.selectorLabels" -}}
app.kubernetes.io/name: {{ include "levee.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "levee.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "levee.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "levee.secretName" -}}
{{- default (printf "%s-credentials" (include "levee.fullname" .)) .Values.secret.existingSecret -}}
{{- end -}}

{{- define "levee.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "levee.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
levee.join is node.join: the headless Service's name, which resolves to
every pod's IP, ready or not (publishNotReadyAddresses). memberlist's Join
resolves a name to all its addresses and contacts each, so one seed covers
any replica count and a scale changes nothing in the config. rqlite's chart
joins the same way (-disco-mode=dns on its headless Service,
rqlite/helm-charts charts/rqlite/templates/_statefulset.tpl); Consul's
lists one DNS name per server (-retry-join per ordinal,
hashicorp/consul-k8s charts/consul/templates/server-statefulset.yaml),
which would change the config on every scale.
*/}}
{{- define "levee.join" -}}
{{- printf "%s.%s.svc.%s:%d" (include "levee.headless" .) .Release.Namespace .Values.clusterDomain (int .Values.ports.gossip) -}}
{{- end -}}

{{/*
levee.maxUnavailable keeps a Raft quorum of replicaCount voters through a
voluntary disruption: 0 for 1 or 2 nodes (either one is needed), 1 for 3,
4 and 5, n/2-1 above, as Consul's chart computes it (consul.pdb.maxUnavailable
in hashicorp/consul-k8s charts/consul/templates/_helpers.tpl). An override
may not exceed (n-1)/2, the most a quorum survives.
*/}}
{{- define "levee.maxUnavailable" -}}
{{- $n := int .Values.replicaCount -}}
{{- $most := div (sub $n 1) 2 -}}
{{- if not (kindIs "invalid" .Values.pdb.maxUnavailable) -}}
{{- $set := int .Values.pdb.maxUnavailable -}}
{{- if gt $set $most -}}
{{- fail (printf "pdb.maxUnavailable %d would let a voluntary disruption take %d of %d Raft voters: at most %d keeps a quorum" $set $set $n $most) -}}
{{- end -}}
{{- $set -}}
{{- else if le $n 2 -}}
0
{{- else if le $n 5 -}}
1
{{- else -}}
{{- sub (div $n 2) 1 -}}
{{- end -}}
{{- end -}}

{{/* The pod's grace period: the preStop sleep, the drain and the shutdown, plus 5 s. */}}
{{- define "levee.terminationGracePeriod" -}}
{{- $need := add (int .Values.preStopSleepSeconds) (int .Values.drainDelaySeconds) (int .Values.shutdownTimeoutSeconds) -}}
{{- $set := int .Values.terminationGracePeriodSeconds -}}
{{- if eq $set 0 -}}
{{- add $need 5 -}}
{{- else if le $set $need -}}
{{- fail (printf "terminationGracePeriodSeconds %d must be above preStopSleepSeconds + drainDelaySeconds + shutdownTimeoutSeconds = %d, or the kubelet kills the node before it has saved its cache and handed off Raft leadership" $set $need) -}}
{{- else -}}
{{- $set -}}
{{- end -}}
{{- end -}}

{{/*
levee.config is the node's config file. The chart owns the keys that
depend on the pod or on other values (chartOwned below); the rest comes
from .Values.config, .Values.routes and .Values.hosts. Credentials are
never in it: they reach the node as LEVEE_CLUSTER_* variables from the
Secret.
*/}}
{{- define "levee.config" -}}
{{- $v := .Values -}}
{{- if lt (int $v.replicaCount) 1 -}}
{{- fail "replicaCount must be at least 1" -}}
{{- end -}}
{{- if not (has $v.configReload (list "restart" "manual")) -}}
{{- fail (printf "configReload must be restart or manual, got %v" $v.configReload) -}}
{{- end -}}
{{- $cfg := deepCopy (default dict $v.config) -}}
{{- range $key := list "routes" "hosts" -}}
{{- if hasKey $cfg $key -}}
{{- fail (printf "config.%s: set %s at the top level of the values, not under config" $key $key) -}}
{{- end -}}
{{- end -}}
{{- $node := default dict (get $cfg "node") -}}
{{- range $key := list "name" "advertise" "http" "gossip" "raft" "admin" "data_dir" "join" "bootstrap_expect" "drain_delay" "shutdown_timeout" -}}
{{- if hasKey $node $key -}}
{{- fail (printf "config.node.%s is set by the chart (see values.yaml, config)" $key) -}}
{{- end -}}
{{- end -}}
{{- $cluster := default dict (get $cfg "cluster") -}}
{{- range $key := list "secret" "admin_token" "trusted_secrets" -}}
{{- if hasKey $cluster $key -}}
{{- fail (printf "config.cluster.%s is a credential: it comes from the Secret (secret.existingSecret), never from values" $key) -}}
{{- end -}}
{{- end -}}
{{- $_ := set $node "http" (printf "0.0.0.0:%d" (int $v.ports.http)) -}}
{{- $_ := set $node "gossip" (printf "0.0.0.0:%d" (int $v.ports.gossip)) -}}
{{- $_ := set $node "raft" (printf "0.0.0.0:%d" (int $v.ports.internal)) -}}
{{- if gt (int $v.ports.admin) 0 -}}
{{- $_ := set $node "admin" (printf "0.0.0.0:%d" (int $v.ports.admin)) -}}
{{- end -}}
{{- $_ := set $node "data_dir" "/data" -}}
{{- $_ := set $node "join" (list (include "levee.join" .)) -}}
{{- $_ := set $node "bootstrap_expect" (int $v.replicaCount) -}}
{{- $_ := set $node "drain_delay" (printf "%ds" (int $v.drainDelaySeconds)) -}}
{{- $_ := set $node "shutdown_timeout" (printf "%ds" (int $v.shutdownTimeoutSeconds)) -}}
{{- $_ := set $cfg "node" $node -}}
{{- if $cluster -}}
{{- $_ := set $cfg "cluster" $cluster -}}
{{- end -}}
{{- if not $v.routes -}}
{{- fail "routes: at least one route is required (README, Configuration)" -}}
{{- end -}}
{{- $_ := set $cfg "routes" $v.routes -}}
{{- if $v.hosts -}}
{{- $_ := set $cfg "hosts" $v.hosts -}}
{{- end -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/*
levee.configChecksum is the config's checksum without node.bootstrap_expect:
a scale (which changes only that key) must not roll every pod, or a
scale-down would restart the survivors while a removed voter is still in
the Raft configuration (docs/kubernetes.md, "Scale"). The key only counts
when a cluster first forms, and as the floor below which the leader does
not reap dead members; pods started later read the new value.
*/}}
{{- define "levee.configChecksum" -}}
{{- $cfg := include "levee.config" . | fromYaml -}}
{{- $_ := unset $cfg.node "bootstrap_expect" -}}
{{- toYaml $cfg | sha256sum -}}
{{- end -}}
