package proxy

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/levee/levee/breaker"
	"github.com/levee/levee/store"
)

// TestWriteInvalidatesItsURL: an unsafe method the upstream may have
// applied removes every cached answer of its URL and tenant (each variant)
// and hands the removal to the cluster hook; a refused or failed write, or
// another tenant's, leaves them (issue 10, rule 8; RFC 9111 §4.4).
func TestWriteInvalidatesItsURL(t *testing.T) {
	tests := []struct {
		name    string
		method  string
		tenant  string
		write   func(*http.Request) (*http.Response, error)
		open    bool // the breaker is forced open: nothing is sent
		wantHit bool // the cached answers survive
	}{
		{"created", http.MethodPost, "acme", reply(201, "made"), false, false},
		{"deleted", http.MethodDelete, "acme", reply(204, ""), false, false},
		{"answer lost on the way back", http.MethodPut, "acme", netError, false, false},
		{"refused by the upstream", http.MethodPost, "acme", reply(404, "no"), false, true},
		{"failed at the upstream", http.MethodPost, "acme", reply(503, "down"), false, true},
		{"never sent: breaker open", http.MethodPost, "acme", reply(201, "made"), true, true},
		{"another tenant's write", http.MethodPost, "other", reply(201, "made"), false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := testRoute()
				rg := newRig(t, rt)
				var hooked []string
				rg.engine.cfg.OnInvalidate = func(rkey string, at, until time.Time) {
					if until.Sub(at) < rt.Fresh+rt.Stale+rt.StaleIfError {
						t.Errorf("tombstone for %v, shorter than the route keeps an answer", until.Sub(at))
					}
					hooked = append(hooked, rkey)
				}
				rg.up.set(reply(200, "v1", "Vary", "Accept-Language"))
				for _, lang := range []string{"en", "fr"} {
					rg.serve(t, get("stories/1", "X-Tenant", "acme", "Accept-Language", lang))
				}
				if tt.open {
					rg.table.Apply(breaker.Command{V: breaker.CommandVersion, Op: breaker.OpForceOpen, Route: rt.Name,
						Node: "admin", At: time.Now().UnixNano()})
				}
				time.Sleep(time.Second)
				rg.up.set(tt.write)
				w := get("stories/1", "X-Tenant", tt.tenant)
				w.Method = tt.method
				rg.engine.Serve(context.Background(), w)
				rg.up.set(reply(200, "v2", "Vary", "Accept-Language"))
				for _, lang := range []string{"en", "fr"} {
					if hit := rg.serve(t, get("stories/1", "X-Tenant", "acme", "Accept-Language", lang)).Result == Hit; hit != tt.wantHit && !tt.open {
						t.Fatalf("%s: hit = %v, want %v", lang, hit, tt.wantHit)
					}
				}
				want := []string{routingKey(rt, get("stories/1", "X-Tenant", tt.tenant))}
				if tt.wantHit && tt.tenant == "acme" {
					want = nil
				}
				if !slices.Equal(hooked, want) {
					t.Fatalf("OnInvalidate got %q, want %q", hooked, want)
				}
			})
		})
	}
}

// TestOlderCopyIsRefusedAfterAWrite: a copy stored before the write (a late
// replication push, a hand-off, a recovered entry) is not stored again
// through Put; an answer fetched after the write is.
func TestOlderCopyIsRefusedAfterAWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := testRoute()
		rg := newRig(t, rt)
		pkey := primaryKey(rt, get("stories/1"))
		old := store.NewEntry(200, http.Header{}, []byte("old"), time.Now(), store.Windows{Fresh: time.Hour})
		time.Sleep(time.Second)
		del := get("stories/1")
		del.Method = http.MethodDelete
		rg.up.set(reply(204, ""))
		rg.serve(t, del)
		rg.engine.Put(pkey, old)
		if _, ent := rg.engine.Lookup(pkey, http.Header{}); ent != nil {
			t.Fatalf("an answer older than the write came back: %q", ent.Body)
		}
		time.Sleep(time.Second)
		newer := store.NewEntry(200, http.Header{}, []byte("new"), time.Now(), store.Windows{Fresh: time.Hour})
		rg.engine.Put(pkey, newer)
		if _, ent := rg.engine.Lookup(pkey, http.Header{}); ent == nil || string(ent.Body) != "new" {
			t.Fatalf("an answer newer than the write was refused: %v", ent)
		}
	})
}

// TestCachedKeysAreTheEnginesKeys: the keys an invalidation removes are the
// primary keys the engine stores GET and HEAD answers under, for any URL
// and tenant.
func TestCachedKeysAreTheEnginesKeys(t *testing.T) {
	rt := testRoute()
	for _, r := range []*Request{
		get("stories/1"),
		get("stories/1?b=2&a=1", "X-Tenant", "acme"),
		get("a%2Fb/c?q=%00x"),
		get(""),
	} {
		var want []string
		for _, m := range []string{http.MethodGet, http.MethodHead} {
			g := *r
			g.Method = m
			want = append(want, primaryKey(rt, &g))
		}
		if got := CachedKeys(routingKey(rt, r)); !slices.Equal(got, want) {
			t.Errorf("CachedKeys(%q) = %q, want %q", routingKey(rt, r), got, want)
		}
	}
}

// TestAVariantFromBeforeAWriteNeverComesBack: a write removes its URL's
// Vary marker and hides the variants under it for as long as its
// tombstone lasts, sized by what the marker says. A variant can outlive
// that: the marker took a shorter-lived variant's windows, or it was
// evicted before the write. Once the tombstone ended, the next marker led
// to the variant from before the write again. Variants older than the
// marker's since are no answer; those stored under the marker are.
func TestAVariantFromBeforeAWriteNeverComesBack(t *testing.T) {
	cases := []struct {
		name  string
		setup func(rg *rig)
	}{
		{"a shorter-lived variant gave the marker its windows", func(rg *rig) {
			rg.up.set(reply(200, "fr before write", "Cache-Control", "max-age=10", "Vary", "X-Lang"))
			wantResult(t, rg.serve(t, get("stories/1", "X-Lang", "fr")), Miss, "fr before write")
		}},
		{"the marker was evicted", func(rg *rig) {
			rg.cache.Delete(primaryKey(testRoute(), get("stories/1")))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rg := newRig(t, testRoute())
				rg.up.set(reply(200, "en before write", "Cache-Control", "max-age=3600", "Vary", "X-Lang"))
				wantResult(t, rg.serve(t, get("stories/1", "X-Lang", "en")), Miss, "en before write")
				tc.setup(rg)
				rg.up.set(reply(200, "ok"))
				post := get("stories/1")
				post.Method = http.MethodPost
				rg.serve(t, post)
				time.Sleep(11 * time.Minute) // past the tombstone
				rg.up.set(reply(200, "after write", "Cache-Control", "max-age=3600", "Vary", "X-Lang"))
				wantResult(t, rg.serve(t, get("stories/1", "X-Lang", "fr")), Miss, "after write") // a new marker
				wantResult(t, rg.serve(t, get("stories/1", "X-Lang", "en")), Miss, "after write")
				// Variants stored under the marker stay answers.
				wantResult(t, rg.serve(t, get("stories/1", "X-Lang", "fr")), Hit, "after write")
				wantResult(t, rg.serve(t, get("stories/1", "X-Lang", "en")), Hit, "after write")
			})
		})
	}
}

func TestMarkerSinceReadsOnlyItsOwnField(t *testing.T) {
	at := time.Unix(1700000000, 5)
	cases := []struct {
		name   string
		header http.Header
		want   time.Time
	}{
		{"laid by this release", varyMarker([]string{"X-Lang"}, &store.Entry{}, at).Header, at},
		{"none: a marker from an older release", http.Header{"Vary": {"X-Lang"}}, time.Time{}},
		{"unreadable", http.Header{"Vary": {"X-Lang"}, sinceField: {"soon"}}, time.Time{}},
		{"two values", http.Header{"Vary": {"X-Lang"}, sinceField: {"1", "2"}}, time.Time{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := markerSince(&store.Entry{Header: tc.header}); !got.Equal(tc.want) {
				t.Fatalf("markerSince = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestAVariantFetchedBesideTheOneLayingTheMarkerIsAnAnswer: two callers'
// variants fetched at once, with no marker yet: the one that began first
// comes back last, stored as of before the marker the other laid. It is
// still an answer (a marker's since reaches back a retry budget).
func TestAVariantFetchedBesideTheOneLayingTheMarkerIsAnAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := testRoute()
		rt.KeyHeaders = []string{"Authorization"}
		rg := newRig(t, rt)
		rg.up.set(func(r *http.Request) (*http.Response, error) {
			who := r.Header.Get("Authorization")
			if who == "a" {
				time.Sleep(2 * time.Second) // a's answer comes last
			}
			return reply(200, "for "+who, "Cache-Control", "max-age=60")(r)
		})
		done := make(chan struct{})
		go func() {
			defer close(done)
			rg.serve(t, get("stories/1", "Authorization", "a"))
		}()
		time.Sleep(time.Second)
		wantResult(t, rg.serve(t, get("stories/1", "Authorization", "b")), Miss, "for b")
		<-done
		wantResult(t, rg.serve(t, get("stories/1", "Authorization", "a")), Hit, "for a")
		wantResult(t, rg.serve(t, get("stories/1", "Authorization", "b")), Hit, "for b")
	})
}

// TestAWritesRemovalArrivingAfterANewerMarkerStillEndsTheOldVariants: a
// write on another node at W; a read here after W stores its variant and
// lays a marker before the removal arrives, so the marker survives it. A
// variant stored while the removal's tombstone lasts, and a marker pushed
// by the owner then, keep the variants from before W no answer once it
// ends.
func TestAWritesRemovalArrivingAfterANewerMarkerStillEndsTheOldVariants(t *testing.T) {
	for _, during := range []string{"a variant stored", "a marker pushed"} {
		t.Run(during, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := testRoute()
				rg := newRig(t, rt)
				pkey := primaryKey(rt, get("stories/1"))
				rg.up.set(reply(200, "en before write", "Cache-Control", "max-age=3600", "Vary", "X-Lang"))
				wantResult(t, rg.serve(t, get("stories/1", "X-Lang", "en")), Miss, "en before write")
				old, _ := rg.cache.Get(pkey)
				time.Sleep(time.Second)
				writeAt := time.Now() // on another node
				time.Sleep(time.Second)
				rg.up.set(reply(200, "fr after write", "Cache-Control", "max-age=10", "Vary", "X-Lang"))
				wantResult(t, rg.serve(t, get("stories/1", "X-Lang", "fr")), Miss, "fr after write")
				time.Sleep(time.Second) // the removal arrives (replica.apply)
				for _, k := range CachedKeys(routingKey(rt, get("stories/1"))) {
					rg.cache.Invalidate(k, writeAt, writeAt.Add(time.Minute))
				}
				if during == "a variant stored" {
					rg.up.set(reply(200, "de", "Cache-Control", "max-age=3600", "Vary", "X-Lang"))
					wantResult(t, rg.serve(t, get("stories/1", "X-Lang", "de")), Miss, "de")
				} else { // the owner's marker, laid before it heard of the write, a day long
					m := withSince(old, markerSince(old))
					m.StoredAt, m.FreshUntil, m.StaleUntil, m.ErrorUntil = time.Now(), time.Now().Add(24*time.Hour), time.Now().Add(24*time.Hour), time.Now().Add(24*time.Hour)
					if !rg.engine.Put(pkey, m) {
						t.Fatal("the owner's marker was refused")
					}
				}
				time.Sleep(11 * time.Minute) // past the tombstone
				if got := rg.serve(t, get("stories/1", "X-Lang", "en")); got.Result == Hit {
					t.Fatalf("the variant from before the write came back: %s %q", got.Result, got.Body)
				}
			})
		})
	}
}
