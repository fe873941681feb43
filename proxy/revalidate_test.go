package proxy

import (
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/levee/levee/store"
)

// staleRead is what a request on the stale path holds once its lookup
// returned and before it starts its refresh (serveCached): the prepared
// request, its primary key and the entry it found.
type staleRead struct {
	rt   *Route
	r    *Request
	pkey string
	old  *store.Entry
}

// readStale looks r up as serveCached does and checks it found a stale
// answer.
func readStale(t *testing.T, rg *rig, r *Request) staleRead {
	t.Helper()
	rt, _ := rg.engine.route(r.Route)
	pr, err := prepare(rt, r)
	if err != nil {
		t.Fatal(err)
	}
	pkey := primaryKey(rt, pr)
	_, old := rg.engine.lookup(pkey, pr.Header)
	if old == nil || old.Freshness(time.Now()) != store.Stale {
		t.Fatalf("lookup found %v, want a stale answer", old)
	}
	return staleRead{rt: rt, r: pr, pkey: pkey, old: old}
}

// refresh goes on where serveCached left the request: it starts the
// stale entry's refresh.
func (s staleRead) refresh(rg *rig) { rg.engine.refresh(s.rt, s.r, s.pkey, s.old) }

// TestARefreshDecidedBeforeARenewalMakesNoSecondCall: two requests read a
// stale answer at once; one starts its refresh, which gets a 304, renews the
// answer and leaves the in-flight map, before the other (descheduled
// between its lookup and its refresh) starts its own. The second refresh
// finds the renewed answer and calls nobody: one revalidation per fresh
// window (issue 24: a 5-node chaos run saw n3 send a second conditional
// request 2 ms after the first's 304, for a key two clients read at the
// same tick). The same holds when the answer was renewed by a miss (the
// entry went past its stale window between the two requests), and when it
// varies (the lookup follows the Vary marker to the renewed variant).
func TestARefreshDecidedBeforeARenewalMakesNoSecondCall(t *testing.T) {
	tests := []struct {
		name     string
		answer   []string      // the first answer's headers, besides its ETag
		renewAt  time.Duration // when the other request renews it, after the late one read it
		renewing Result        // what the renewing request gets
	}{
		{"renewed by a refresh", nil, 0, Stale},
		{"renewed by a refresh, varied answer", []string{"Vary", "X-Tenant"}, 0, Stale},
		{"renewed by a miss past the stale window", nil, 15 * time.Second, Revalidated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rg := newRig(t, testRoute())
				req := func() *Request { return get("stories/1023/comments", "X-Tenant", "acme") }
				rg.up.set(reply(200, "v1", append([]string{"ETag", `"v1"`}, tt.answer...)...))
				wantResult(t, rg.serve(t, req()), Miss, "v1")
				time.Sleep(16 * time.Second) // stale
				late := readStale(t, rg, req())

				time.Sleep(tt.renewAt)
				rg.up.set(reply(http.StatusNotModified, "", append([]string{"ETag", `"v1"`}, tt.answer...)...))
				wantResult(t, rg.serve(t, req()), tt.renewing, "v1")
				synctest.Wait() // renewed, stored, and out of the in-flight map
				if n := rg.calls(); n != 2 {
					t.Fatalf("upstream calls after the renewal = %d, want 2 (fill, revalidation)", n)
				}

				late.refresh(rg)
				synctest.Wait()
				if n := rg.calls(); n != 2 {
					t.Fatalf("upstream calls = %d, want 2: the late refresh revalidated the answer just renewed, inside its fresh window", n)
				}
				wantResult(t, rg.serve(t, req()), Hit, "v1")
			})
		})
	}
}
