package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

const hostsYAML = `
hosts:
  https://API.example.com:                    # any case; the default port optional
    inflight: 8
    rate: 20
    burst: 40
  http://127.0.0.1:9000: {rate: 5}            # the other keys keep their defaults
upstream:
  max_inflight: 32
routes:
  - {name: comments, prefix: /comments/, upstream: "https://api.example.com/v1/comments"}
  - {name: users, prefix: /users/, upstream: "https://api.example.com:443/v1/users"}
  - {name: local, prefix: /local/, upstream: "http://127.0.0.1:9000/api"}
  - {name: other, prefix: /other/, upstream: "https://other.example.com/"}
`

func TestHostsAreConfiguredOnceForEveryRouteCallingThem(t *testing.T) {
	c := mustParse(t, hostsYAML)
	if got := c.Upstream.MaxInflight; got != 32 {
		t.Errorf("upstream.max_inflight = %d, want 32", got)
	}
	want := map[string]HostLimits{
		"https://api.example.com:443":   {Inflight: 8, Rate: 20, Burst: 40},
		"http://127.0.0.1:9000":         {Inflight: 64, Rate: 5, Burst: 100},
		"https://other.example.com:443": DefaultHostLimits(),
	}
	if got := c.ResolvedHosts(); !reflect.DeepEqual(got, want) {
		t.Fatalf("ResolvedHosts() =\n%v\nwant\n%v", got, want)
	}
	out, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if back := mustParse(t, string(out)); !reflect.DeepEqual(c, back) {
		t.Fatalf("hosts: did not survive a YAML round trip:\n%s", out)
	}
}

func TestHostsDefaults(t *testing.T) {
	c := mustParse(t, minimalYAML)
	if c.Hosts != nil || c.Upstream.MaxInflight != 256 {
		t.Fatalf("hosts %v, upstream %+v; want none and max_inflight 256", c.Hosts, c.Upstream)
	}
	want := map[string]HostLimits{"http://127.0.0.1:9000": {Inflight: 64, Rate: 50, Burst: 100}}
	if got := c.ResolvedHosts(); !reflect.DeepEqual(got, want) {
		t.Fatalf("ResolvedHosts() = %v, want %v", got, want)
	}
	if c := mustParse(t, "hosts: {}\n"+minimalYAML); c.Hosts != nil {
		t.Fatalf("an empty hosts: decoded as %v, want nil", c.Hosts)
	}
}

// TestRouteLimitsStillCapTheirHost: the deprecated route limits keep
// working while no two routes disagree about one host.
func TestRouteLimitsStillCapTheirHost(t *testing.T) {
	c := mustParse(t, `
routes:
  - {name: a, prefix: /a/, upstream: "http://x/a", limits: {rate: 5}}
  - {name: b, prefix: /b/, upstream: "http://x:80/b"}
  - {name: c, prefix: /c/, upstream: "http://x/c", limits: {rate: 5}}
  - {name: d, prefix: /d/, upstream: "http://y/d", limits: {inflight: 64, rate: 50, burst: 100}}
`)
	want := map[string]HostLimits{
		"http://x:80": {Inflight: 64, Rate: 5, Burst: 100},
		"http://y:80": DefaultHostLimits(),
	}
	if got := c.ResolvedHosts(); !reflect.DeepEqual(got, want) {
		t.Fatalf("ResolvedHosts() = %v, want %v", got, want)
	}
}

func TestHostsInvalid(t *testing.T) {
	routeOnX := "routes:\n  - {name: r, prefix: /r/, upstream: 'http://x/'}\n"
	tests := []struct {
		name, src string
		want      []string
	}{
		{"hosts not a mapping", "hosts: [a]\n" + routeOnX, []string{"hosts: must be a mapping"}},
		{"entry not a mapping", "hosts: {'http://x': 5}\n" + routeOnX, []string{`hosts["http://x"]: must be a mapping`}},
		{"unknown key in an entry", "hosts: {'http://x': {rates: 5}}\n" + routeOnX, []string{`hosts["http://x"].rates: unknown key`}},
		{"duplicate key", "hosts: {'http://x': {}, 'http://x': {}}\n" + routeOnX, []string{`hosts["http://x"]: duplicate key`}},
		{"not an origin", "hosts: {'http://x/api': {}}\n" + routeOnX, []string{`hosts["http://x/api"]: must be an origin only`}},
		{"no scheme", "hosts: {'x': {}}\n" + routeOnX, []string{`hosts["x"]: must start with http:// or https://`}},
		{"one host twice", "hosts: {'http://x': {}, 'HTTP://X:80/': {}}\n" + routeOnX,
			[]string{`hosts["http://x"]: names the same host as hosts["HTTP://X:80/"] (http://x:80)`}},
		{"no route calls it", "hosts: {'https://x': {}}\n" + routeOnX, []string{`hosts["https://x"]: no route calls https://x:443`}},
		{"zero caps", "hosts: {'http://x': {inflight: 0, rate: 0, burst: 0}}\n" + routeOnX, []string{
			`hosts["http://x"].inflight: must be >= 1`, `hosts["http://x"].rate: must be > 0`, `hosts["http://x"].burst: must be >= 1`}},
		{"bad number", "hosts: {'http://x': {rate: fast}}\n" + routeOnX, []string{`hosts["http://x"].rate: invalid number "fast"`}},
		{"route limits for a listed host", "hosts: {'http://x': {rate: 5}}\n" + oneRoute("limits: {rate: 7}"),
			[]string{`routes[0].limits: is set here and by hosts["http://x"]`}},
		{"two routes disagree", oneRoute("limits: {rate: 7}") + "  - {name: s, prefix: /s/, upstream: 'http://x:80/s', limits: {rate: 8}}\n",
			[]string{"routes[1].limits: {Inflight:64 Rate:8 Burst:100} differs from routes[0].limits {Inflight:64 Rate:7 Burst:100} for the same host http://x:80"}},
		{"global cap", "upstream: {max_inflight: 0}\n" + routeOnX, []string{"upstream.max_inflight: must be >= 1"}},
		{"adaptive floor under the bound", "hosts: {'http://x': {adaptive: {enabled: true, floor: 0.05}}}\n" + routeOnX,
			[]string{`hosts["http://x"].adaptive.floor: must be 0 (the default) or in [0.1, rate 50]`}},
		{"adaptive floor above the rate", "hosts: {'http://x': {rate: 5, adaptive: {floor: 6}}}\n" + routeOnX,
			[]string{`hosts["http://x"].adaptive.floor: must be 0 (the default) or in [0.1, rate 5]`}},
		{"adaptive not a mapping", "hosts: {'http://x': {adaptive: true}}\n" + routeOnX, []string{`hosts["http://x"].adaptive: must be a mapping`}},
		{"unknown adaptive key", "hosts: {'http://x': {adaptive: {ceiling: 5}}}\n" + routeOnX, []string{`hosts["http://x"].adaptive.ceiling: unknown key`}},
		{"unknown upstream key", "upstream: {inflight: 3}\n" + routeOnX, []string{"upstream.inflight: unknown key"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.src))
			if err == nil {
				t.Fatalf("Parse succeeded (%+v), want an error\n%s", c, tt.src)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
		})
	}
}

func TestHostAdaptiveIsParsedAndOffByDefault(t *testing.T) {
	tests := []struct {
		name, entry string
		want        HostAdaptive
	}{
		{"absent", "{rate: 20}", HostAdaptive{}},
		{"enabled with the default floor", "{rate: 20, adaptive: {enabled: true}}", HostAdaptive{Enabled: true}},
		{"a floor", "{rate: 20, adaptive: {enabled: true, floor: 2.5}}", HostAdaptive{Enabled: true, Floor: 2.5}},
		{"a floor at the rate", "{rate: 20, adaptive: {floor: 20}}", HostAdaptive{Floor: 20}},
		{"each node alone", "{rate: 20, adaptive: {enabled: true, per_node: true}}", HostAdaptive{Enabled: true, PerNode: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, "hosts: {'http://127.0.0.1:9000': "+tt.entry+"}\n"+minimalYAML)
			if got := c.ResolvedHosts()["http://127.0.0.1:9000"].Adaptive; got != tt.want {
				t.Fatalf("adaptive = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestHostsInCode: a Config built in Go is checked the same way.
func TestHostsInCode(t *testing.T) {
	c := Default()
	r := DefaultRoute()
	r.Name, r.Prefix, r.Upstream = "r", "/r/", "https://api.example.com/v1"
	c.Routes = []Route{r}
	c.Hosts = map[string]HostLimits{"https://api.example.com": {Inflight: 4, Rate: 2, Burst: 1}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c.Hosts["https://api.example.com"] = HostLimits{}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), `hosts["https://api.example.com"].rate: must be > 0`) {
		t.Fatalf("Validate = %v, want the zero caps named", err)
	}
}
