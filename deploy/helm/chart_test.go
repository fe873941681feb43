package helm_test

import (
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/levee/levee/config"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// renders are the values the chart is checked with: its defaults at 3, 5
// and 1 replicas, and levee/ci/production.yaml (an existing Secret, the
// admin port, a NetworkPolicy, the Prometheus objects, a drain delay,
// hosts and a queue) at 3 and 5.
var renders = []struct {
	name     string
	files    []string
	sets     map[string]string
	replicas int
}{
	{name: "defaults", replicas: 3},
	{name: "five", files: []string{"five"}, replicas: 5},
	{name: "single", sets: map[string]string{"replicaCount": "1"}, replicas: 1},
	{name: "production", files: []string{"production"}, replicas: 3},
	{name: "production-five", files: []string{"production", "five"}, replicas: 5},
}

func TestChartRendersAClusterLeveeAccepts(t *testing.T) {
	for _, r := range renders {
		t.Run(r.name, func(t *testing.T) {
			m := render(t, r.files, r.sets)
			checks := []struct {
				name  string
				check func(*testing.T, *manifest, int)
			}{
				{"statefulset", checkStatefulSet},
				{"services", checkServices},
				{"pdb keeps a quorum", checkPDB},
				{"probes", checkProbes},
				{"stopping", checkStopping},
				{"secret references", checkSecretRefs},
				{"security context", checkSecurity},
				{"config passes levee check on every pod", checkLeveeConfig},
				{"network policy", checkNetworkPolicy},
				{"prometheus objects", checkPrometheus},
			}
			for _, c := range checks {
				t.Run(c.name, func(t *testing.T) { c.check(t, m, r.replicas) })
			}
		})
	}
}

func container(t *testing.T, m *manifest) *corev1.Container {
	t.Helper()
	cs := m.statefulSet.Spec.Template.Spec.Containers
	if len(cs) != 1 || cs[0].Name != "levee" {
		t.Fatalf("containers = %d, want one named levee", len(cs))
	}
	return &cs[0]
}

// port is the container port called name, or fails.
func port(t *testing.T, c *corev1.Container, name string) corev1.ContainerPort {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("container has no port named %q", name)
	return corev1.ContainerPort{}
}

func checkStatefulSet(t *testing.T, m *manifest, n int) {
	s := m.statefulSet.Spec
	if s.Replicas == nil || int(*s.Replicas) != n {
		t.Errorf("replicas = %v, want %d", s.Replicas, n)
	}
	if s.PodManagementPolicy != "Parallel" {
		t.Errorf("podManagementPolicy = %q, want Parallel", s.PodManagementPolicy)
	}
	if s.UpdateStrategy.Type != "RollingUpdate" || s.UpdateStrategy.RollingUpdate.MaxUnavailable != nil {
		t.Errorf("updateStrategy = %+v, want RollingUpdate one pod at a time", s.UpdateStrategy)
	}
	if s.MinReadySeconds < 1 {
		t.Errorf("minReadySeconds = %d: the next pod would stop the moment the previous is ready, before its Raft store is open", s.MinReadySeconds)
	}
	if h := m.services[s.ServiceName]; h == nil || h.Spec.ClusterIP != "None" {
		t.Errorf("serviceName %q is not a headless Service of the chart", s.ServiceName)
	}
	if !subset(s.Selector.MatchLabels, s.Template.Labels) {
		t.Errorf("selector %v does not match the pod labels %v", s.Selector.MatchLabels, s.Template.Labels)
	}
	if len(s.VolumeClaimTemplates) != 1 || s.VolumeClaimTemplates[0].Name != "data" {
		t.Fatalf("volumeClaimTemplates = %d, want one named data", len(s.VolumeClaimTemplates))
	}
	if mountOf(container(t, m), "data") != "/data" {
		t.Errorf("the data claim is mounted at %q, want /data (node.data_dir)", mountOf(container(t, m), "data"))
	}
	if p := m.statefulSet.Spec.PersistentVolumeClaimRetentionPolicy; p == nil || p.WhenScaled != "Delete" {
		t.Errorf("persistentVolumeClaimRetentionPolicy = %+v, want whenScaled Delete", p)
	}
}

func mountOf(c *corev1.Container, volume string) string {
	for _, v := range c.VolumeMounts {
		if v.Name == volume {
			return v.MountPath
		}
	}
	return ""
}

func subset(sub, of map[string]string) bool {
	if len(sub) == 0 {
		return false
	}
	for k, v := range sub {
		if of[k] != v {
			return false
		}
	}
	return true
}

func checkServices(t *testing.T, m *manifest, _ int) {
	c := container(t, m)
	pods := m.statefulSet.Spec.Template.Labels
	headless := m.services[m.statefulSet.Spec.ServiceName]
	if !headless.Spec.PublishNotReadyAddresses {
		t.Error("the headless Service does not publish not-ready pods: a new cluster could never join")
	}
	wantHeadless := map[string]corev1.Protocol{"gossip-tcp": "TCP", "gossip-udp": "UDP", "internal": "TCP"}
	var client *corev1.Service
	for name, svc := range m.services {
		if !subset(svc.Spec.Selector, pods) {
			t.Errorf("Service %s selects %v, not the pods (%v)", name, svc.Spec.Selector, pods)
		}
		for _, p := range svc.Spec.Ports {
			cp := port(t, c, p.TargetPort.StrVal)
			if p.TargetPort.Type != intstr.String || cp.Protocol != p.Protocol {
				t.Errorf("Service %s port %s targets %v/%s, want a named container port of the same protocol", name, p.Name, p.TargetPort, p.Protocol)
			}
			delete(wantHeadless, p.Name)
		}
		if svc != headless {
			client = svc
		}
	}
	if len(wantHeadless) > 0 {
		t.Errorf("no Service port for %v", wantHeadless)
	}
	if len(m.services) != 2 || client == nil {
		t.Fatalf("Services = %d, want the headless one and a client one", len(m.services))
	}
	if len(client.Spec.Ports) != 1 || client.Spec.Ports[0].TargetPort.StrVal != "http" {
		t.Errorf("client Service ports = %+v, want the http port alone (never gossip or internal)", client.Spec.Ports)
	}
}

// checkPDB: a voluntary disruption the budget allows leaves a majority of
// the replicaCount voters, and 3 and 5 nodes allow exactly one at a time.
func checkPDB(t *testing.T, m *manifest, n int) {
	if m.pdb == nil {
		t.Fatal("no PodDisruptionBudget")
	}
	mu := m.pdb.Spec.MaxUnavailable
	if mu == nil || mu.Type != intstr.Int || m.pdb.Spec.MinAvailable != nil {
		t.Fatalf("PDB = %+v, want an integer maxUnavailable alone", m.pdb.Spec)
	}
	left := n - mu.IntValue()
	if left < n/2+1 {
		t.Errorf("maxUnavailable %d of %d leaves %d voters, below a quorum of %d", mu.IntValue(), n, left, n/2+1)
	}
	want := map[int]int{1: 0, 3: 1, 5: 1}[n]
	if mu.IntValue() != want {
		t.Errorf("maxUnavailable = %d for %d replicas, want %d", mu.IntValue(), n, want)
	}
	if !subset(m.pdb.Spec.Selector.MatchLabels, m.statefulSet.Spec.Template.Labels) {
		t.Errorf("PDB selector %v does not match the pods", m.pdb.Spec.Selector.MatchLabels)
	}
}

// levee is the node config the pod with ordinal i runs: the ConfigMap's
// file with the pod's environment, loaded as `levee check` and a starting
// node load it.
func levee(t *testing.T, m *manifest, i int) *config.Config {
	t.Helper()
	path := filepath.Join(t.TempDir(), "levee.yaml")
	if err := os.WriteFile(path, []byte(m.configMap.Data["levee.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	env := podEnv(t, m, i)
	cfg, err := config.LoadOverridden(path, config.EnvOverride(func(k string) string { return env[k] }))
	if err != nil {
		t.Fatalf("levee check on pod %d: %v\n%s", i, err, m.configMap.Data["levee.yaml"])
	}
	return cfg
}

// podEnv resolves the container's environment for pod i as the kubelet
// would: its name, an IP, and the Secret's keys (test values when the
// Secret is the operator's own).
func podEnv(t *testing.T, m *manifest, i int) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, e := range container(t, m).Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			env[e.Name] = fmt.Sprintf("%s-%d", m.statefulSet.Name, i)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP":
			env[e.Name] = fmt.Sprintf("10.1.0.%d", 10+i)
		case e.ValueFrom.SecretKeyRef != nil:
			if v, ok := secretValue(t, m, e.ValueFrom.SecretKeyRef); ok {
				env[e.Name] = v
			}
		default:
			t.Fatalf("env %s: a source the test cannot resolve: %+v", e.Name, e.ValueFrom)
		}
	}
	return env
}

// secretValue is the value a secretKeyRef reads: from the rendered Secret,
// or, for an existing Secret, a stand-in of the length `levee secret`
// prints. A missing key is an error unless the reference is optional.
func secretValue(t *testing.T, m *manifest, ref *corev1.SecretKeySelector) (string, bool) {
	t.Helper()
	optional := ref.Optional != nil && *ref.Optional
	if m.secret == nil {
		if optional {
			return "", false
		}
		return fmt.Sprintf("%-43s", "operator-"+ref.Key+"-"+strings.Repeat("x", 20)), true
	}
	if ref.Name != m.secret.Name {
		t.Fatalf("secretKeyRef names %q, the chart's Secret is %q", ref.Name, m.secret.Name)
	}
	v, ok := m.secret.Data[ref.Key]
	if !ok && !optional {
		t.Fatalf("secretKeyRef key %q is not in Secret %s", ref.Key, m.secret.Name)
	}
	return string(v), ok
}

func checkLeveeConfig(t *testing.T, m *manifest, n int) {
	c := container(t, m)
	headless := m.services[m.statefulSet.Spec.ServiceName]
	for i := range n {
		cfg := levee(t, m, i)
		pod := fmt.Sprintf("%s-%d", m.statefulSet.Name, i)
		if cfg.Node.Name != pod {
			t.Errorf("pod %d: node.name = %q, want the pod's name %q", i, cfg.Node.Name, pod)
		}
		if cfg.Node.BootstrapExpect != n {
			t.Errorf("node.bootstrap_expect = %d, want replicaCount %d", cfg.Node.BootstrapExpect, n)
		}
		if cfg.Node.DataDir != mountOf(c, "data") {
			t.Errorf("node.data_dir = %q, the claim is at %q", cfg.Node.DataDir, mountOf(c, "data"))
		}
		if cfg.Node.LeaveOnTerminate {
			t.Error("node.leave_on_terminate: a rolling update would give up every seat in turn")
		}
		// The one seed is the headless Service's cluster DNS name, on the
		// port gossip listens on.
		want := fmt.Sprintf("%s.%s.svc.cluster.local:%d", headless.Name, namespace, port(t, c, "gossip-tcp").ContainerPort)
		if len(cfg.Node.Join) != 1 || cfg.Node.Join[0] != want {
			t.Errorf("node.join = %q, want [%q]", cfg.Node.Join, want)
		}
		for key, addr := range map[string]string{"http": cfg.Node.HTTP, "gossip-tcp": cfg.Node.Gossip, "internal": cfg.Node.Raft} {
			if got := portOf(t, addr); got != port(t, c, key).ContainerPort {
				t.Errorf("config port for %s = %d, container port = %d", key, got, port(t, c, key).ContainerPort)
			}
		}
		if cfg.Node.Admin != "" && portOf(t, cfg.Node.Admin) != port(t, c, "admin").ContainerPort {
			t.Errorf("node.admin %s is not the container's admin port", cfg.Node.Admin)
		}
		limit := c.Resources.Limits.Memory()
		if limit.Value() <= cfg.EffectiveMemoryLimit() {
			t.Errorf("memory limit %s is not above the node's Go memory limit %d bytes", limit, cfg.EffectiveMemoryLimit())
		}
	}
}

func portOf(t *testing.T, addr string) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	n, perr := strconv.Atoi(p)
	if err != nil || perr != nil {
		t.Fatalf("address %q has no port", addr)
	}
	return int32(n)
}

func checkProbes(t *testing.T, m *manifest, _ int) {
	c := container(t, m)
	http := levee(t, m, 0).Node.HTTP
	for name, p := range map[string]struct {
		probe *corev1.Probe
		path  string
	}{
		"readiness": {c.ReadinessProbe, "/-/readyz"},
		"liveness":  {c.LivenessProbe, "/-/healthz"},
		"startup":   {c.StartupProbe, "/-/healthz"},
	} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s probe is not an HTTP GET", name)
			continue
		}
		g := p.probe.HTTPGet
		if g.Path != p.path || port(t, c, g.Port.StrVal).ContainerPort != portOf(t, http) {
			t.Errorf("%s probe = %s on %v, want %s on node.http %s", name, g.Path, g.Port, p.path, http)
		}
	}
}

// checkStopping: the kubelet's grace period outlasts the preStop sleep,
// the node's drain and its shutdown, as the node's config states them.
func checkStopping(t *testing.T, m *manifest, _ int) {
	c := container(t, m)
	cfg := levee(t, m, 0)
	var preStop time.Duration
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		if c.Lifecycle.PreStop.Sleep == nil {
			t.Fatal("preStop is not a sleep: the image has no shell")
		}
		preStop = time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	}
	if want := valueInt(t, m, "preStopSleepSeconds"); preStop != time.Duration(want)*time.Second {
		t.Errorf("preStop sleeps %v, want preStopSleepSeconds %ds", preStop, want)
	}
	grace := time.Duration(*m.statefulSet.Spec.Template.Spec.TerminationGracePeriodSeconds) * time.Second
	need := preStop + cfg.Node.DrainDelay.D() + cfg.Node.ShutdownTimeout.D()
	if grace <= need {
		t.Errorf("terminationGracePeriodSeconds %v is not above preStop %v + drain_delay %v + shutdown_timeout %v",
			grace, preStop, cfg.Node.DrainDelay.D(), cfg.Node.ShutdownTimeout.D())
	}
	if want := valueInt(t, m, "drainDelaySeconds"); cfg.Node.DrainDelay.D() != time.Duration(want)*time.Second {
		t.Errorf("node.drain_delay = %v, want drainDelaySeconds %ds", cfg.Node.DrainDelay.D(), want)
	}
}

// valueInt is a top-level value after the chart's defaults.
func valueInt(t *testing.T, m *manifest, key string) int {
	t.Helper()
	if v, ok := m.values[key]; ok {
		return toInt(t, v)
	}
	raw, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var defaults map[string]any
	if err := yaml.Unmarshal(raw, &defaults); err != nil {
		t.Fatal(err)
	}
	return toInt(t, defaults[key])
}

func toInt(t *testing.T, v any) int {
	t.Helper()
	switch n := v.(type) {
	case float64:
		return int(n)
	case int64:
		return int(n)
	case int:
		return n
	}
	t.Fatalf("%v is not a number", v)
	return 0
}

// checkSecretRefs: both credentials reach the node from the Secret and
// never from the ConfigMap; a Secret the chart makes holds values of its
// own, not defaults.
func checkSecretRefs(t *testing.T, m *manifest, _ int) {
	c := container(t, m)
	refs := map[string]*corev1.SecretKeySelector{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			refs[e.Name] = e.ValueFrom.SecretKeyRef
		}
	}
	for _, name := range []string{"LEVEE_CLUSTER_SECRET", "LEVEE_CLUSTER_ADMIN_TOKEN"} {
		ref := refs[name]
		if ref == nil || (ref.Optional != nil && *ref.Optional) {
			t.Errorf("%s is not a required secretKeyRef", name)
		}
	}
	if sv, _ := m.values["secret"].(map[string]any); sv["existingSecret"] != nil && m.secret != nil {
		t.Error("the chart made a Secret though secret.existingSecret names one")
	}
	file, err := config.Decode([]byte(m.configMap.Data["levee.yaml"]))
	if err != nil {
		t.Fatal(err)
	}
	if file.Cluster.Secret != "" || file.Cluster.AdminToken != "" || len(file.Cluster.TrustedSecrets) > 0 {
		t.Error("the ConfigMap holds a credential")
	}
	if m.secret == nil {
		return
	}
	s, a := string(m.secret.Data["cluster-secret"]), string(m.secret.Data["admin-token"])
	if len(s) < 43 || len(a) < 43 || s == a {
		t.Errorf("secret %d chars, admin token %d chars, equal %v: want two different values of at least 43", len(s), len(a), s == a)
	}
	if m.secret.Annotations["helm.sh/resource-policy"] != "keep" {
		t.Error("the chart's Secret is not kept: an uninstall would lose the secret the claims' Raft state was formed under")
	}
}

func checkSecurity(t *testing.T, m *manifest, _ int) {
	pod := m.statefulSet.Spec.Template.Spec
	ps := pod.SecurityContext
	if ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot || ps.RunAsUser == nil || *ps.RunAsUser == 0 || ps.FSGroup == nil {
		t.Errorf("pod securityContext = %+v, want non-root with an fsGroup", ps)
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Error("the pod mounts a service account token; Levee calls no Kubernetes API")
	}
	c := container(t, m)
	sc := c.SecurityContext
	switch {
	case sc == nil:
		t.Fatal("no container securityContext")
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Error("root filesystem is writable")
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Error("privilege escalation is allowed")
	case sc.Capabilities == nil || !reflect.DeepEqual(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0:
		t.Errorf("capabilities = %+v, want drop [ALL] and nothing added", sc.Capabilities)
	case sc.Privileged != nil && *sc.Privileged:
		t.Error("privileged")
	}
	for _, r := range []struct {
		list corev1.ResourceList
		name corev1.ResourceName
	}{{c.Resources.Requests, "cpu"}, {c.Resources.Requests, "memory"}, {c.Resources.Limits, "memory"}} {
		if q, ok := r.list[r.name]; !ok || q.Cmp(resource.Quantity{}) <= 0 {
			t.Errorf("resource %s not set", r.name)
		}
	}
}

func checkNetworkPolicy(t *testing.T, m *manifest, _ int) {
	np := m.networkPolicy
	if np == nil {
		return // off unless networkPolicy.enabled
	}
	pods := m.statefulSet.Spec.Template.Labels
	if !subset(np.Spec.PodSelector.MatchLabels, pods) {
		t.Errorf("NetworkPolicy selects %v, not the pods", np.Spec.PodSelector.MatchLabels)
	}
	internal := map[string]bool{"gossip-tcp": true, "gossip-udp": true, "internal": true}
	seen := 0
	for _, rule := range np.Spec.Ingress {
		for _, p := range rule.Ports {
			if !internal[p.Port.StrVal] {
				continue
			}
			seen++
			if len(rule.From) == 0 {
				t.Errorf("port %s is open to every source", p.Port.StrVal)
			}
			for _, from := range rule.From {
				if from.PodSelector == nil || !subset(from.PodSelector.MatchLabels, pods) || from.NamespaceSelector != nil || from.IPBlock != nil {
					t.Errorf("port %s is open to %+v, not only to Levee's pods", p.Port.StrVal, from)
				}
			}
		}
	}
	if seen != len(internal) {
		t.Errorf("the NetworkPolicy names %d of the %d internal ports: the others would be closed to peers", seen, len(internal))
	}
}

func checkPrometheus(t *testing.T, m *manifest, _ int) {
	if sm := m.serviceMonitor; sm != nil {
		var target *corev1.Service
		for _, svc := range m.services {
			if subset(sm.Spec.Selector.MatchLabels, svc.Labels) {
				if target != nil {
					t.Error("the ServiceMonitor selects two Services: every pod scraped twice")
				}
				target = svc
			}
		}
		if target == nil || !target.Spec.PublishNotReadyAddresses {
			t.Fatal("the ServiceMonitor does not select the headless Service (a pod that is not ready would not be scraped)")
		}
		for _, ep := range sm.Spec.Endpoints {
			found := false
			for _, p := range target.Spec.Ports {
				found = found || p.Name == ep.Port
			}
			if !found || ep.Path != "/metrics" {
				t.Errorf("ServiceMonitor endpoint %+v: no such port on %s, or not /metrics", ep, target.Name)
			}
			if cfg := levee(t, m, 0); cfg.Node.Admin != "" && ep.Port != "admin" {
				t.Errorf("node.admin is set, so /metrics is only there; the ServiceMonitor scrapes %s", ep.Port)
			}
		}
	}
	if pr := m.prometheusRule; pr != nil {
		raw, err := os.ReadFile(filepath.Join("..", "prometheus", "alerts.yml"))
		if err != nil {
			t.Fatal(err)
		}
		var shipped ruleFile
		if err := yaml.UnmarshalStrict(raw, &shipped); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(pr.Spec, shipped) || len(shipped.Groups) == 0 {
			t.Error("the PrometheusRule's groups are not deploy/prometheus/alerts.yml's")
		}
	}
}

// The chart's own Secret is drawn at random on each render without a
// cluster to look it up in: no two installs share a credential, and none
// is a value anyone can read in the repository.
func TestChartSecretIsDrawnNotShipped(t *testing.T) {
	a, b := render(t, nil, nil), render(t, nil, nil)
	raw, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"cluster-secret", "admin-token"} {
		va, vb := a.secret.Data[key], b.secret.Data[key]
		if string(va) == string(vb) {
			t.Errorf("%s is the same in two renders: a fixed value", key)
		}
		if strings.Contains(string(raw), string(va)) || strings.Contains(string(raw), base64.StdEncoding.EncodeToString(va)) {
			t.Errorf("%s appears in values.yaml", key)
		}
	}
	if a.statefulSet.Spec.Template.Annotations["checksum/config"] != b.statefulSet.Spec.Template.Annotations["checksum/config"] {
		t.Error("the config checksum moved with the random secret: every upgrade would roll the pods")
	}
}

// configReload: restart rolls the pods when, and only when, the config
// changes; manual leaves them.
func TestChartConfigChecksumFollowsTheConfig(t *testing.T) {
	sum := func(sets map[string]string) string {
		return render(t, nil, sets).statefulSet.Spec.Template.Annotations["checksum/config"]
	}
	base := sum(nil)
	if base == "" {
		t.Fatal("no checksum/config annotation with configReload: restart")
	}
	tests := []struct {
		name    string
		sets    map[string]string
		changes bool
	}{
		{"same values", nil, false},
		{"a log level", map[string]string{"config.node.log_level": "debug"}, true},
		{"a route's windows", map[string]string{"routes": `[{name: example, prefix: /example/, upstream: "https://api.example.com/", cache: {fresh: 1m}}]`}, true},
		// A scale changes bootstrap_expect alone: no roll (levee.configChecksum).
		{"replicaCount", map[string]string{"replicaCount": "5"}, false},
		{"an image tag", map[string]string{"image.tag": "v2"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sum(tt.sets) != base; got != tt.changes {
				t.Errorf("checksum changed = %v, want %v", got, tt.changes)
			}
		})
	}
	if s := sum(map[string]string{"configReload": "manual"}); s != "" {
		t.Errorf("configReload: manual still has a checksum %q", s)
	}
}

// Values that would break the cluster fail the render, with a message
// that says why.
func TestChartRefusesValuesThatBreakTheCluster(t *testing.T) {
	tests := []struct {
		name    string
		sets    map[string]string
		wantErr string
	}{
		{"a budget past the quorum", map[string]string{"pdb.maxUnavailable": "2"}, "at most 1 keeps a quorum"},
		{"a grace period below the shutdown", map[string]string{"terminationGracePeriodSeconds": "10"}, "must be above"},
		{"a secret in values", map[string]string{"config.cluster.secret": "0123456789abcdef0123"}, "config.cluster.secret is a credential"},
		{"an admin token in values", map[string]string{"config.cluster.admin_token": "0123456789abcdef0123"}, "config.cluster.admin_token is a credential"},
		{"a join list of one's own", map[string]string{"config.node.join": `["a:7946"]`}, "config.node.join is set by the chart"},
		{"bootstrap_expect apart from replicaCount", map[string]string{"config.node.bootstrap_expect": "5"}, "config.node.bootstrap_expect is set by the chart"},
		{"no routes", map[string]string{"routes": "[]"}, "at least one route"},
		{"routes under config", map[string]string{"config.routes": `[{name: a}]`}, "config.routes: set routes at the top level"},
		{"no replicas", map[string]string{"replicaCount": "0"}, "replicaCount"},
		{"an unknown reload mode", map[string]string{"configReload": "watch"}, "configReload"},
		{"a misspelt value (values.schema.json)", map[string]string{"replicas": "5"}, "additional properties 'replicas' not allowed"},
		{"a port as a string", map[string]string{"ports.http": `"8080"`}, "ports/http"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := renderChart(t, valuesOf(t, nil, tt.sets))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("render err = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

// A config value Levee refuses renders (the chart does not know Levee's
// rules) but fails levee check, which is what catches it here and at the
// node's start.
func TestChartConfigLeveeRefusesFailsTheCheck(t *testing.T) {
	m := render(t, nil, map[string]string{"config.cache.max_bytes": "0"})
	path := filepath.Join(t.TempDir(), "levee.yaml")
	if err := os.WriteFile(path, []byte(m.configMap.Data["levee.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	env := podEnv(t, m, 0)
	_, err := config.LoadOverridden(path, config.EnvOverride(func(k string) string { return env[k] }))
	if err == nil || !strings.Contains(err.Error(), "cache.max_bytes") {
		t.Fatalf("levee check = %v, want an error naming cache.max_bytes", err)
	}
}

// A scale changes the replica count and the ConfigMap's bootstrap_expect,
// not the pod template: the StatefulSet adds or removes pods and restarts
// none of the others, so a scale-down never restarts survivors while the
// removed voter still holds its seat (docs/kubernetes.md, "Scale").
func TestChartScaleDoesNotRollThePods(t *testing.T) {
	three, five := render(t, nil, nil), render(t, []string{"five"}, nil)
	if !reflect.DeepEqual(three.statefulSet.Spec.Template, five.statefulSet.Spec.Template) {
		t.Error("the pod template differs between 3 and 5 replicas: a scale would roll every pod")
	}
	if levee(t, five, 0).Node.BootstrapExpect != 5 {
		t.Error("the ConfigMap of 5 replicas does not expect 5")
	}
}
