package helm_test

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/levee/levee/config"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"
)

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
