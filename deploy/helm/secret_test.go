package helm_test

import (
	"encoding/base64"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"sigs.k8s.io/yaml"

	corev1 "k8s.io/api/core/v1"
)

// secretsOnly answers the chart's lookup of Secrets from a fake cluster.
type secretsOnly struct{ client dynamic.Interface }

func (p secretsOnly) GetClientFor(apiVersion, kind string) (dynamic.NamespaceableResourceInterface, bool, error) {
	return p.client.Resource(schema.GroupVersionResource{Version: "v1", Resource: "secrets"}), true, nil
}

// renderSecretOnUpgrade renders the chart's Secret against a cluster that
// already holds one with data (base64 values, as the API returns them).
func renderSecretOnUpgrade(t *testing.T, data map[string]any) *corev1.Secret {
	t.Helper()
	existing := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": releaseName + "-levee-credentials", "namespace": namespace},
		"data":     data,
	}}
	client := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme(), existing)
	ch := loadChart(t)
	caps := *chartutil.DefaultCapabilities
	caps.KubeVersion = chartutil.KubeVersion{Version: "v1.33.0", Major: "1", Minor: "33"}
	top, err := chartutil.ToRenderValues(ch, map[string]any{}, chartutil.ReleaseOptions{
		Name: releaseName, Namespace: namespace, Revision: 2, IsUpgrade: true,
	}, &caps)
	if err != nil {
		t.Fatal(err)
	}
	out, err := engine.RenderWithClientProvider(ch, top, secretsOnly{client})
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	var s corev1.Secret
	if err := yaml.UnmarshalStrict([]byte(out["levee/templates/secret.yaml"]), &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

// An upgrade keeps the credentials the cluster was formed with: new ones
// would split it (every node needs the same secret) and lock operators
// out. A key the old Secret lacks is drawn anew.
func TestChartSecretSurvivesAnUpgrade(t *testing.T) {
	const (
		oldSecret = "b2xkLWNsdXN0ZXItc2VjcmV0LW9mLXRoaXMtcmVsZWFzZS0xMjM0NTY3ODkw" // base64
		oldToken  = "b2xkLWFkbWluLXRva2VuLW9mLXRoaXMtcmVsZWFzZS0xMjM0NTY3ODkwMTI="
		trusted   = "dGhlLXNlY3JldC1iZWZvcmUtdGhlLXJvdGF0aW9uLTAxMjM0NTY3ODk="
	)
	tests := []struct {
		name string
		data map[string]any
		keep map[string]string // key -> base64 value kept
	}{
		{"both kept", map[string]any{"cluster-secret": oldSecret, "admin-token": oldToken},
			map[string]string{"cluster-secret": oldSecret, "admin-token": oldToken}},
		{"a rotation's trusted secrets kept", map[string]any{"cluster-secret": oldSecret, "admin-token": oldToken, "trusted-secrets": trusted},
			map[string]string{"cluster-secret": oldSecret, "admin-token": oldToken, "trusted-secrets": trusted}},
		{"a missing token drawn, the secret kept", map[string]any{"cluster-secret": oldSecret},
			map[string]string{"cluster-secret": oldSecret}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := renderSecretOnUpgrade(t, tt.data)
			for key, want := range tt.keep {
				if got := b64(s.Data[key]); got != want {
					t.Errorf("%s = %q, want the existing %q", key, got, want)
				}
			}
			if tok := s.Data["admin-token"]; len(tok) < 43 {
				t.Errorf("admin-token has %d characters", len(tok))
			}
			if _, ok := tt.data["trusted-secrets"]; !ok && s.Data["trusted-secrets"] != nil {
				t.Error("trusted-secrets made up though the old Secret had none")
			}
		})
	}
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
