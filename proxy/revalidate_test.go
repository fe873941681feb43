package proxy

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/levee/levee/store"
)

// lateRead is what a request holds once its lookup returned and before it
// joins the in-flight map (serveCached): the prepared request, its primary
// key, the entry it found and what it found it to be.
type lateRead struct {
	rt   *Route
	r    *Request
	pkey string
	old  *store.Entry
	saw  store.Freshness
}

// readNow looks r up as serveCached does and checks the answer it found
// is in the state want.
func readNow(t *testing.T, rg *rig, r *Request, want store.Freshness) lateRead {
	t.Helper()
	rt, _ := rg.engine.route(r.Route)
	pr, err := prepare(rt, r)
	if err != nil {
		t.Fatal(err)
	}
	pkey := primaryKey(rt, pr)
	_, old := rg.engine.lookup(pkey, pr.Header)
	if old == nil || old.Freshness(time.Now()) != want {
		t.Fatalf("lookup found %v, want a %s answer", old, want)
	}
	return lateRead{rt: rt, r: pr, pkey: pkey, old: old, saw: want}
}

// goOn takes the request on from its lookup as serveCached would on what
// it found then: a stale answer's refresh, or an expired one's coalesced
// fetch.
func (l lateRead) goOn(t *testing.T, rg *rig) {
	t.Helper()
	if l.saw == store.Stale {
		rg.engine.refresh(l.rt, l.r, l.pkey, l.old)
		return
	}
	f, _, err := rg.engine.fetchCoalesced(context.Background(), l.rt, l.r, l.pkey, l.old)
	if err != nil || f.result != Hit {
		t.Fatalf("the late miss's fetch: %v, %v; want a Hit of the renewed answer", f, err)
	}
}

// TestAFetchDecidedBeforeARenewalMakesNoSecondCall: two requests read an
// answer past its fresh window at once; one fetches (a refresh, or a
// revalidation past the stale window), gets a 304, renews the answer and
// leaves the in-flight map before the other, descheduled between its
// lookup and the map, goes on. The late one finds the renewed answer and
// calls nobody: one revalidation per fresh window. Issue 24: a 5-node
// chaos run saw n3 send a second conditional request 2 ms after the
// first's 304; the refresh had no such check, the miss's fetch had. Also
// when the answer varies (the check follows the Vary marker to the renewed
// variant), and when the other request's fetch was a miss past the stale
// window while the late one had still read the answer stale.
func TestAFetchDecidedBeforeARenewalMakesNoSecondCall(t *testing.T) {
	tests := []struct {
		name     string
		answer   []string        // the answer's headers, besides its ETag
		read     time.Duration   // when the late request reads, after the fill
		lateSaw  store.Freshness // what it finds
		renewAt  time.Duration   // when the other request renews, after the fill
		renewing Result          // what that request gets
	}{
		{"a refresh, renewed by a refresh", nil, 16 * time.Second, store.Stale, 16 * time.Second, Stale},
		{"a refresh of a varied answer, renewed by a refresh", []string{"Vary", "X-Tenant"}, 16 * time.Second, store.Stale, 16 * time.Second, Stale},
		{"a refresh, renewed by a miss past the stale window", nil, 29 * time.Second, store.Stale, 31 * time.Second, Revalidated},
		{"a miss past the stale window, renewed by a miss", nil, 31 * time.Second, store.Expired, 31 * time.Second, Revalidated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rg := newRig(t, testRoute())
				req := func() *Request { return get("stories/1023/comments", "X-Tenant", "acme") }
				rg.up.set(reply(200, "v1", append([]string{"ETag", `"v1"`}, tt.answer...)...))
				wantResult(t, rg.serve(t, req()), Miss, "v1")
				time.Sleep(tt.read)
				late := readNow(t, rg, req(), tt.lateSaw)

				time.Sleep(tt.renewAt - tt.read)
				rg.up.set(reply(http.StatusNotModified, "", append([]string{"ETag", `"v1"`}, tt.answer...)...))
				wantResult(t, rg.serve(t, req()), tt.renewing, "v1")
				synctest.Wait() // renewed, stored, and out of the in-flight map
				if n := rg.calls(); n != 2 {
					t.Fatalf("upstream calls after the renewal = %d, want 2 (fill, revalidation)", n)
				}

				late.goOn(t, rg)
				synctest.Wait()
				if n := rg.calls(); n != 2 {
					t.Fatalf("upstream calls = %d, want 2: the late request revalidated the answer just renewed, inside its fresh window", n)
				}
				wantResult(t, rg.serve(t, req()), Hit, "v1")
			})
		})
	}
}
