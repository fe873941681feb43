package config

import (
	"reflect"
	"testing"

	"go.yaml.in/yaml/v3"
)

// FuzzParse checks that Parse never panics, that what it accepts passes
// Validate, and that what it accepts survives a YAML round trip unchanged.
func FuzzParse(f *testing.F) {
	seeds := []string{
		exampleYAML,
		minimalYAML,
		safetyYAML,
		"routes: [{name: a, prefix: /a/, upstream: 'http://x/', tenant_key_header: K, tenant_keys: &k {<<: *k, a: *k}}]",
		"",
		"routes: [{name: a, prefix: /a/, upstream: 'http://x/'}, {name: b, prefix: /a/b/, upstream: 'http://x/'}]",
		"routes:\n  - &r {name: a, prefix: /a/, upstream: 'http://x/', cache: &c {fresh: 1m}}\n  - {<<: *r, name: b, prefix: /b/, cache: {<<: *c}}\n",
		"node: &n {<<: *n}\nroutes: []",
		"a: &a [*a, *a]\n",
		"node: {name: n1, join: a:1, gossip: ':0'}\nroutes: [{name: a, prefix: /, upstream: 'https://h:1/p%2F'}]",
		"cluster: {load_factor: .inf, near_cache: {ttl: 1s, max_bytes: 0}}\nroutes: [~]",
		"routes: [{name: a, prefix: /a/, upstream: 'http://x/', retry: {network: {base: 1h, cap: 1h}, budget: 24s}}]",
		"- [",
		"routes: [{name: a, prefix: /a/, upstream: 'https://x/', tls: {server_name: x, insecure_skip_verify: true, ca_file: /dev/null}}]",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			if c != nil {
				t.Fatalf("Parse returned a config with error %v", err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Parse accepted a config that Validate rejects: %v", err)
		}
		for _, r := range c.Routes {
			if r.UpstreamURL == nil {
				t.Fatalf("route %q has no UpstreamURL", r.Name)
			}
		}
		out, err := yaml.Marshal(c)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		back, err := Parse(out)
		if err != nil {
			t.Fatalf("re-Parse of marshalled config failed: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(c, back) {
			t.Fatalf("round trip changed the config\n%s", out)
		}
	})
}
