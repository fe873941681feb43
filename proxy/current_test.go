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
				resp := rg.serve(t, en)
				time.Sleep(time.Second)
				if hit := rg.serve(t, en); hit.Result != Hit || !hit.StoredAt.Equal(resp.StoredAt) {
					t.Fatalf("the second GET was %s stored at %v, want a hit stored at %v", hit.Result, hit.StoredAt, resp.StoredAt)
				}
				if tt.then != nil {
					tt.then(rg)
				}
				pkey := primaryKey(rt, en)
				names, _ := VaryNames(resp.Header)
				key := VaryKey(pkey, names, en.Header)
				if tt.key != nil {
					key = tt.key(pkey)
				}
				stored := resp.StoredAt
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
