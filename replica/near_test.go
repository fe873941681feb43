package replica

import (
	"net/http"
	"testing"
	"time"

	"github.com/levee/levee/internal/testutil"
	"github.com/levee/levee/proxy"
	"github.com/levee/levee/store"
)

// TestNearCacheFollowsTheEnginesVaryRule: the near cache keys variants the
// way the engine does (proxy.VaryNames/VaryKey, one owner of the rule), so a
// client with another Accept-Language never gets a neighbour's variant, and
// a "Vary: *" answer is never near-cached at all.
func TestNearCacheFollowsTheEnginesVaryRule(t *testing.T) {
	clk := testutil.NewClock(time.Time{})
	c, err := store.New(store.Config{MaxBytes: 1 << 20, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	near := newNearCache(c, time.Second, clk.Now)
	answer := func(vary string) *proxy.Response {
		return &proxy.Response{Status: 200, Header: http.Header{"Vary": {vary}}, Body: []byte(vary),
			Result: proxy.Miss, FreshFor: time.Minute}
	}
	en := http.Header{"Accept-Language": {"en"}}
	fr := http.Header{"Accept-Language": {"fr"}}
	tests := []struct {
		name    string
		vary    string
		putWith http.Header
		getWith http.Header
		hit     bool
	}{
		{"same variant", "accept-language", en, en, true},
		{"other variant", "Accept-Language", en, fr, false},
		{"vary star never stored", "*", en, en, false},
		{"star among names never stored", "Accept-Language, *", en, en, false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rkey := string(rune('a' + i))
			near.put(http.MethodGet, rkey, tt.putWith, answer(tt.vary), clk.Now())
			_, ok := near.get(rkey, &proxy.Request{Method: http.MethodGet, Header: tt.getWith})
			if ok != tt.hit {
				t.Fatalf("near hit = %v, want %v", ok, tt.hit)
			}
		})
	}
	near.put(http.MethodGet, "ttl", en, answer("Accept-Language"), clk.Now())
	clk.Advance(time.Second)
	if _, ok := near.get("ttl", &proxy.Request{Method: http.MethodGet, Header: en}); ok {
		t.Fatal("near entry served past its ttl")
	}
}
