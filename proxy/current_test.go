package proxy

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestCurrentVouchesOnlyForTheAnswerARequestWouldGetNow: a near copy is
// renewed only while it is the answer the owner would serve a forward of
// the same request now: same variant key under the same Vary names, same
// store time, still fresh, and not removed by a write.
func TestCurrentVouchesOnlyForTheAnswerARequestWouldGetNow(t *testing.T) {
	rt := testRoute()
	en := get("stories/1", "Accept-Language", "en")
	tests := []struct {
		name  string
		vary  string                   // the upstream's Vary ("": none)
		then  func(rg *rig)            // what happens after the answer is stored
		key   func(pkey string) string // the key asked about ("": the answer's own)
		stale bool                     // ask with the store time off by 1 ns
		want  bool
	}{
		{name: "the answer itself", want: true},
		{name: "a variant under its marker", vary: "Accept-Language", want: true},
		{name: "another store time", stale: true},
		{name: "a variant key under other Vary names", vary: "Accept-Language",
			key: func(p string) string { return VaryKey(p, []string{"Accept-Encoding"}, en.Header) }},
		{name: "a variant key without its marker's names", vary: "Accept-Language",
			key: func(p string) string { return p + "\x00Accept-Language=00" }},
		{name: "the marker itself", vary: "Accept-Language", key: func(p string) string { return p }},
		{name: "stale on the owner", then: func(*rig) { time.Sleep(rt.Fresh) }},
		{name: "a variant its marker no longer leads to", vary: "Accept-Language", then: func(rg *rig) {
			// The answer now varies on Cookie: a French reader's miss
			// stores a new marker, and the English variant stays stored.
			rg.up.set(reply(200, "v2", "Vary", "Cookie"))
			rg.serve(t, get("stories/1", "Accept-Language", "fr"))
		}},
		{name: "a variant from before its marker's since", vary: "Accept-Language", then: func(rg *rig) {
			// A new marker whose variants start after the English one.
			pkey := primaryKey(rt, en)
			m, _ := rg.cache.Get(pkey)
			rg.cache.Set(pkey, withSince(m, time.Now().Add(time.Nanosecond)))
		}},
		{name: "removed by a write", then: func(rg *rig) {
			rg.engine.cfg.Cache.Invalidate(primaryKey(rt, en), time.Now(), time.Now().Add(time.Hour))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rg := newRig(t, rt)
				if tt.vary != "" {
					rg.up.set(reply(200, "v1", "Vary", tt.vary))
				} else {
					rg.up.set(reply(200, "v1"))
				}
				miss := rg.serve(t, en)
				time.Sleep(time.Second)
				hit := rg.serve(t, en)
				pkey := primaryKey(rt, en)
				names, _ := VaryNames(hit.Header)
				key := VaryKey(pkey, names, en.Header)
				for _, r := range []*Response{miss, hit} { // the fetch that stored it names it as its hits do
					if r.Key != key || !r.StoredAt.Equal(miss.StoredAt) || r.StoredAt.IsZero() {
						t.Fatalf("a %s names %q stored at %v, want %q stored at %v", r.Result, r.Key, r.StoredAt, key, miss.StoredAt)
					}
				}
				if hit.Result != Hit {
					t.Fatalf("the second GET was a %s", hit.Result)
				}
				if tt.then != nil {
					tt.then(rg)
				}
				if tt.key != nil {
					key = tt.key(pkey)
				}
				stored := hit.StoredAt
				if tt.stale {
					stored = stored.Add(time.Nanosecond)
				}
				fresh := rg.engine.Current(pkey, key, stored)
				if fresh > 0 != tt.want {
					t.Fatalf("Current = %v, want vouched = %v", fresh, tt.want)
				}
				if tt.want && fresh != rt.Fresh-time.Second {
					t.Fatalf("Current = %v, want the %v of freshness left", fresh, rt.Fresh-time.Second)
				}
			})
		})
	}
}

// TestAWaiterNamesTheCopyItsFetcherStored: requests that waited on one
// fetch name the cached answer the fetch stored, under the key their own
// hits will name, each for its own variant when the answer varies.
func TestAWaiterNamesTheCopyItsFetcherStored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := testRoute()
		rg := newRig(t, rt)
		rg.up.set(reply(200, "v1", "Vary", "Accept-Language"))
		en := func() *Request { return get("stories/1", "Accept-Language", "en", "X-Trace", "1") }
		out := burst(t, rg, en(), en(), en())
		if n := rg.calls(); n != 1 {
			t.Fatalf("upstream calls = %d, want 1", n)
		}
		pkey := primaryKey(rt, en())
		want := VaryKey(pkey, []string{"Accept-Language"}, en().Header)
		for i, r := range out {
			if r.Key != want || !r.StoredAt.Equal(out[0].StoredAt) || r.StoredAt.IsZero() {
				t.Fatalf("answer %d (collapsed %v) names %q stored at %v, want %q stored at %v", i, r.Collapsed, r.Key, r.StoredAt, want, out[0].StoredAt)
			}
			if rg.engine.Current(pkey, r.Key, r.StoredAt) <= 0 {
				t.Fatalf("answer %d names a copy its engine does not vouch for", i)
			}
		}
		if !out[1].Collapsed {
			t.Fatal("the second request did not wait on the first's fetch")
		}
	})
}
