package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestHTTPCredentialTenantsKeepTheirOwnJobs is the tenant rule of the job
// queue through a real listener and the real proxy engine: on /keyed/
// (tenant from the API key, required) two tenants sending one
// Idempotency-Key get two jobs, two keys of one tenant share one, and a
// job's Location answers only a key of its tenant.
func TestHTTPCredentialTenantsKeepTheirOwnJobs(t *testing.T) {
	jobs := newLocalJobs(roomyBounds)
	st := newStackWith(t, func(c *Config) {
		c.Jobs = jobs
		for i := range c.Routes {
			c.Routes[i].Host = "http://upstream:80"
		}
	})
	post := func(key string) string {
		t.Helper()
		resp, body := st.do(t, http.MethodPost, "/keyed/orders", strings.NewReader(`{"by":"`+key+`"}`),
			"Prefer", "respond-async", "X-Api-Key", key, "Idempotency-Key", "order-1")
		var a accepted
		if resp.StatusCode != http.StatusAccepted || json.Unmarshal([]byte(body), &a) != nil || a.ID == "" {
			t.Fatalf("POST with %s: %d %s, want 202", key, resp.StatusCode, body)
		}
		return a.ID
	}
	acme, globex := post("acme-1"), post("globex-1")
	if acme == globex {
		t.Fatal("globex got acme's job for the same Idempotency-Key")
	}
	if again := post("acme-2"); again != acme {
		t.Errorf("acme's other key made job %s, want acme's %s", again, acme)
	}
	if j, _ := jobs.Job(globex); j.Req.Tenant != "globex" || string(j.Req.Body) != `{"by":"globex-1"}` {
		t.Errorf("globex's job holds tenant %q body %s", j.Req.Tenant, j.Req.Body)
	}
	for _, tt := range []struct {
		name, id, key string
		want          int
	}{
		{"acme's other key", acme, "acme-2", http.StatusOK},
		{"globex on acme's job", acme, "globex-1", http.StatusNotFound},
		{"acme on globex's job", globex, "acme-1", http.StatusNotFound},
		{"an unknown key", acme, "nobody", http.StatusNotFound},
	} {
		if resp, body := st.get(t, "/-/jobs/"+tt.id, "X-Api-Key", tt.key); resp.StatusCode != tt.want {
			t.Errorf("%s: %d %s, want %d", tt.name, resp.StatusCode, body, tt.want)
		}
	}
}
