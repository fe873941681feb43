package helm_test

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/levee/levee/config"
)

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
