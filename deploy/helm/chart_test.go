package helm_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/levee/levee/config"
	corev1 "k8s.io/api/core/v1"
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
// or, for an existing Secret, a stand-in at least as long as what `levee
// secret` prints. A missing key is an error unless the reference is optional.
func secretValue(t *testing.T, m *manifest, ref *corev1.SecretKeySelector) (string, bool) {
	t.Helper()
	optional := ref.Optional != nil && *ref.Optional
	if m.secret == nil {
		if optional {
			return "", false
		}
		return "operator-" + ref.Key + "-" + strings.Repeat("x", 32), true
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
