package routecfg

import (
	"github.com/levee/levee/upstream/hostkey"
	"reflect"
	"testing"

	"github.com/levee/levee/config"
	"github.com/levee/levee/upstream"
)

const hostsYAML = `
hosts:
  https://api.example.com: {inflight: 8, rate: 20, burst: 40}
upstream: {max_inflight: 32}
routes:
  - {name: comments, prefix: /comments/, upstream: "https://API.example.com/v1/comments"}
  - {name: users, prefix: /users/, upstream: "https://api.example.com:443/v1/users"}
  - {name: legacy, prefix: /legacy/, upstream: "http://127.0.0.1:9/api", limits: {rate: 5}}
  - {name: plain, prefix: /plain/, upstream: "http://plain.example/"}
`

// TestCapsKeyEveryRoutedHostAsTheClientDoes: the client finds each
// route's host in the table it is given, whatever case and port the
// route's upstream is written with.
func TestCapsKeyEveryRoutedHostAsTheClientDoes(t *testing.T) {
	cfg, err := config.Parse([]byte(hostsYAML))
	if err != nil {
		t.Fatal(err)
	}
	hosts, global := Caps(cfg)
	want := map[string]upstream.Limits{
		"https://api.example.com:443": {Inflight: 8, Rate: 20, Burst: 40},
		"http://127.0.0.1:9":          {Inflight: 64, Rate: 5, Burst: 100},
		"http://plain.example:80":     {Inflight: 64, Rate: 50, Burst: 100},
	}
	if !reflect.DeepEqual(hosts, want) || global != 32 {
		t.Fatalf("Caps = %v, %d; want %v, 32", hosts, global, want)
	}
	routes, err := Routes(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range routes {
		if _, ok := hosts[hostkey.Of(rt.Upstream)]; !ok {
			t.Errorf("route %s calls %s, which the table does not key", rt.Name, hostkey.Of(rt.Upstream))
		}
	}
	if err := (upstream.Config{Hosts: hosts, GlobalInflight: global}).Validate(); err != nil {
		t.Fatalf("the client refuses the table: %v", err)
	}
}
