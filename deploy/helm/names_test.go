package helm_test

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// objects is the metadata of every object rendered, by kind.
func (m *manifest) objects() map[string]*metav1.ObjectMeta {
	out := map[string]*metav1.ObjectMeta{
		"StatefulSet": &m.statefulSet.ObjectMeta, "ConfigMap": &m.configMap.ObjectMeta,
	}
	if m.secret != nil {
		out["Secret"] = &m.secret.ObjectMeta
	}
	if m.pdb != nil {
		out["PodDisruptionBudget"] = &m.pdb.ObjectMeta
	}
	if m.networkPolicy != nil {
		out["NetworkPolicy"] = &m.networkPolicy.ObjectMeta
	}
	if m.serviceAccount != nil {
		out["ServiceAccount"] = &m.serviceAccount.ObjectMeta
	}
	for name, s := range m.services {
		out["Service "+name] = &s.ObjectMeta
	}
	return out
}

// The API server's own name rules, which the Go types do not carry: a
// long release name must still give names it accepts, and two objects of
// one kind never collide when the names are cut.
func TestChartNamesAreValidKubernetesNames(t *testing.T) {
	long := strings.Repeat("a", 70)
	tests := []struct {
		name string
		sets map[string]string
	}{
		{"defaults", nil},
		{"a 70-character fullnameOverride", map[string]string{"fullnameOverride": long}},
		{"a 70-character nameOverride", map[string]string{"nameOverride": long}},
		{"the admin port", map[string]string{"ports.admin": "8081", "networkPolicy.enabled": "true"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := render(t, nil, tt.sets)
			checkNames(t, m)
		})
	}
}

func checkNames(t *testing.T, m *manifest) {
	t.Helper()
	problems := func(what string, errs []string) {
		for _, e := range errs {
			t.Errorf("%s: %s", what, e)
		}
	}
	for kind, meta := range m.objects() {
		problems(kind+" name "+meta.Name, validation.IsDNS1123Subdomain(meta.Name))
		checkLabels(t, kind, meta.Labels)
	}
	for name, s := range m.services {
		problems("Service name "+name, validation.IsDNS1035Label(name))
		for _, p := range s.Spec.Ports {
			problems("Service port "+p.Name, validation.IsDNS1123Label(p.Name))
		}
	}
	// The StatefulSet controller labels each pod with its name plus "-"
	// and a revision hash of up to 10 characters, a label value of at
	// most 63; each pod's name is also its DNS label under the headless
	// Service.
	sts := m.statefulSet.Name
	if len(sts) > 52 {
		t.Errorf("StatefulSet name %q has %d characters: its pods' controller-revision-hash label would pass 63", sts, len(sts))
	}
	problems("pod name", validation.IsDNS1123Label(fmt.Sprintf("%s-%d", sts, 99)))
	checkLabels(t, "pod template", m.statefulSet.Spec.Template.Labels)
	c := container(t, m)
	for _, p := range c.Ports {
		problems("container port "+p.Name, validation.IsValidPortName(p.Name))
	}
	for _, e := range c.Env {
		problems("env "+e.Name, validation.IsEnvVarName(e.Name))
	}
	for key := range m.configMap.Data {
		problems("ConfigMap key "+key, validation.IsConfigMapKey(key))
	}
	if m.secret != nil {
		for key := range m.secret.Data {
			problems("Secret key "+key, validation.IsConfigMapKey(key))
		}
	}
	for key := range m.statefulSet.Spec.Template.Annotations {
		problems("annotation "+key, validation.IsQualifiedName(key))
	}
}

func checkLabels(t *testing.T, what string, labels map[string]string) {
	t.Helper()
	for k, v := range labels {
		for _, e := range append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...) {
			t.Errorf("%s label %s=%s: %s", what, k, v, e)
		}
	}
}
