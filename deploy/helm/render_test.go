package helm_test

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

// release is where every test installs the chart.
const (
	releaseName = "cache"
	namespace   = "apps"
	chartDir    = "levee"
)

// manifest is one render of the chart, every object decoded strictly.
type manifest struct {
	values         map[string]any
	statefulSet    *appsv1.StatefulSet
	configMap      *corev1.ConfigMap
	secret         *corev1.Secret // nil with secret.existingSecret
	services       map[string]*corev1.Service
	pdb            *policyv1.PodDisruptionBudget
	networkPolicy  *networkingv1.NetworkPolicy
	serviceAccount *corev1.ServiceAccount
	serviceMonitor *serviceMonitor
	prometheusRule *prometheusRule
}

// The prometheus-operator's types are not among the modules this
// repository may use, so ServiceMonitor and PrometheusRule are decoded into
// these, which hold only the fields the chart sets: a field the chart
// adds without adding it here fails the strict decode, as for the
// k8s.io/api types. Field names follow monitoring.coreos.com/v1.
type serviceMonitor struct {
	APIVersion string             `json:"apiVersion"`
	Kind       string             `json:"kind"`
	Metadata   metadataFields     `json:"metadata"`
	Spec       serviceMonitorSpec `json:"spec"`
}

type metadataFields struct {
	Name      string            `json:"name"`
	Namespace string            `json:"namespace"`
	Labels    map[string]string `json:"labels"`
}

type serviceMonitorSpec struct {
	Selector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	} `json:"selector"`
	NamespaceSelector struct {
		MatchNames []string `json:"matchNames"`
	} `json:"namespaceSelector"`
	Endpoints []struct {
		Port     string `json:"port"`
		Path     string `json:"path"`
		Interval string `json:"interval"`
	} `json:"endpoints"`
}

type prometheusRule struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Metadata   metadataFields `json:"metadata"`
	Spec       ruleFile       `json:"spec"`
}

// ruleFile is Prometheus's rule file format, which PrometheusRule's spec
// repeats.
type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			For         string            `json:"for,omitempty"`
			Labels      map[string]string `json:"labels,omitempty"`
			Annotations map[string]string `json:"annotations,omitempty"`
		} `json:"rules"`
	} `json:"groups"`
}

// loadChart loads levee/ once per test binary.
func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	ch, err := loader.LoadDir(chartDir)
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}
	return ch
}

// valuesOf reads the values files (levee/ci/NAME.yaml) in order, then
// sets, each a dotted key and a YAML value, as `helm -f ... --set` would.
func valuesOf(t *testing.T, files []string, sets map[string]string) map[string]any {
	t.Helper()
	vals := map[string]any{}
	for _, f := range files {
		v, err := chartutil.ReadValuesFile(filepath.Join(chartDir, "ci", f+".yaml"))
		if err != nil {
			t.Fatalf("values %s: %v", f, err)
		}
		vals = mergeValues(vals, v.AsMap())
	}
	for _, key := range slices.Sorted(maps.Keys(sets)) {
		var v any
		if err := yaml.Unmarshal([]byte(sets[key]), &v); err != nil {
			t.Fatalf("--set %s=%s: %v", key, sets[key], err)
		}
		vals = mergeValues(vals, nest(strings.Split(key, "."), v))
	}
	return vals
}

func nest(path []string, v any) map[string]any {
	if len(path) == 1 {
		return map[string]any{path[0]: v}
	}
	return map[string]any{path[0]: nest(path[1:], v)}
}

// mergeValues merges src over dst as Helm merges -f files: maps key by
// key, anything else replaced.
func mergeValues(dst, src map[string]any) map[string]any {
	out := maps.Clone(dst)
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := out[k].(map[string]any); ok {
				out[k] = mergeValues(dm, sm)
				continue
			}
		}
		out[k] = v
	}
	return out
}

// renderChart renders the chart as `helm template` does, without a
// cluster: Secret lookups find nothing.
func renderChart(t *testing.T, vals map[string]any) (map[string]string, error) {
	t.Helper()
	ch := loadChart(t)
	// Helm's default Kubernetes version is the client-go it was built
	// with, unless its build stamps one; the chart needs 1.30 (the preStop
	// Sleep action), so test against a version it supports.
	caps := *chartutil.DefaultCapabilities
	caps.KubeVersion = chartutil.KubeVersion{Version: "v1.33.0", Major: "1", Minor: "33"}
	if !chartutil.IsCompatibleRange(ch.Metadata.KubeVersion, caps.KubeVersion.String()) {
		t.Fatalf("chart's kubeVersion %q excludes the Kubernetes %s it is tested against", ch.Metadata.KubeVersion, caps.KubeVersion)
	}
	top, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{
		Name: releaseName, Namespace: namespace, Revision: 1, IsInstall: true,
	}, &caps)
	if err != nil {
		return nil, err
	}
	return engine.Render(ch, top)
}

// render renders and decodes; any error fails the test.
func render(t *testing.T, files []string, sets map[string]string) *manifest {
	t.Helper()
	vals := valuesOf(t, files, sets)
	out, err := renderChart(t, vals)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	m := &manifest{values: vals, services: map[string]*corev1.Service{}}
	for _, name := range slices.Sorted(maps.Keys(out)) {
		if strings.HasSuffix(name, "NOTES.txt") {
			continue
		}
		for i, doc := range splitDocuments(out[name]) {
			if err := m.add(doc); err != nil {
				t.Fatalf("%s, document %d: %v\n%s", name, i, err, doc)
			}
		}
	}
	if m.statefulSet == nil || m.configMap == nil {
		t.Fatal("render has no StatefulSet or no ConfigMap")
	}
	return m
}

// splitDocuments cuts a rendered template into its YAML documents,
// dropping those that hold only comments or space.
func splitDocuments(s string) [][]byte {
	var docs [][]byte
	for _, doc := range strings.Split("\n"+s, "\n---") {
		var body bool
		for _, line := range strings.Split(doc, "\n") {
			if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
				body = true
			}
		}
		if body {
			docs = append(docs, []byte(doc))
		}
	}
	return docs
}

// add decodes one object strictly (unknown or repeated fields fail) into
// the type its apiVersion and kind name; an object of any other kind is
// an error.
func (m *manifest) add(doc []byte) error {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return err
	}
	strict := func(into any) error { return yaml.UnmarshalStrict(doc, into) }
	switch head.APIVersion + " " + head.Kind {
	case "apps/v1 StatefulSet":
		return once(&m.statefulSet, strict)
	case "v1 ConfigMap":
		return once(&m.configMap, strict)
	case "v1 Secret":
		return once(&m.secret, strict)
	case "v1 ServiceAccount":
		return once(&m.serviceAccount, strict)
	case "policy/v1 PodDisruptionBudget":
		return once(&m.pdb, strict)
	case "networking.k8s.io/v1 NetworkPolicy":
		return once(&m.networkPolicy, strict)
	case "monitoring.coreos.com/v1 ServiceMonitor":
		return once(&m.serviceMonitor, strict)
	case "monitoring.coreos.com/v1 PrometheusRule":
		return once(&m.prometheusRule, strict)
	case "v1 Service":
		var s corev1.Service
		if err := strict(&s); err != nil {
			return err
		}
		if m.services[s.Name] != nil {
			return fmt.Errorf("two Services named %s", s.Name)
		}
		m.services[s.Name] = &s
		return nil
	}
	return fmt.Errorf("unexpected object %s %s: add it to the test", head.APIVersion, head.Kind)
}

// once decodes into a new *T stored in *slot, which must still be nil.
func once[T any](slot **T, strict func(any) error) error {
	if *slot != nil {
		return fmt.Errorf("a second %T", *slot)
	}
	v := new(T)
	if err := strict(v); err != nil {
		return err
	}
	*slot = v
	return nil
}

func TestStrictDecodingRefusesAnUnknownField(t *testing.T) {
	m := &manifest{services: map[string]*corev1.Service{}}
	doc := []byte("apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {clusterIP: None, publishNotReady: true}\n")
	if err := m.add(doc); err == nil || !strings.Contains(err.Error(), "publishNotReady") {
		t.Fatalf("add = %v, want an unknown field error naming publishNotReady", err)
	}
	if err := m.add([]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n")); err == nil {
		t.Fatal("a kind the test does not know was accepted")
	}
}

// The PrometheusRule is built from the chart's copy of the alert rules;
// the copy must be the file promtool checks and tests (make rules).
func TestChartAlertRulesAreDeployPrometheusAlerts(t *testing.T) {
	chartCopy, err := os.ReadFile(filepath.Join(chartDir, "files", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	shipped, err := os.ReadFile(filepath.Join("..", "prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(chartCopy, shipped) {
		t.Fatal("deploy/helm/levee/files/alerts.yml differs from deploy/prometheus/alerts.yml: cp deploy/prometheus/alerts.yml deploy/helm/levee/files/alerts.yml")
	}
}
