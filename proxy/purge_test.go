package proxy

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/levee/levee/store"
)

// purgeHook records what an engine hands Config.OnPurge and reports
// removed answers of its own (a near cache's).
type purgeHook struct {
	scopes []string
	life   []time.Duration // until - at
}

func (h *purgeHook) install(e *Engine, removed int) {
	e.cfg.OnPurge = func(_ context.Context, scope string, at, until time.Time) int {
		h.scopes = append(h.scopes, scope)
		h.life = append(h.life, until.Sub(at))
		return removed
	}
}

// TestPurgeURLRemovesEveryMethodAndVariant: a URL's purge removes its GET
// and HEAD answers, each Vary variant, for the tenant named, and counts
// them (markers are not answers) with what the cluster hook removed;
// another tenant's answers and other URLs stay.
func TestPurgeURLRemovesEveryMethodAndVariant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := testRoute()
		rg := newRig(t, rt)
		var hook purgeHook
		hook.install(rg.engine, 2)
		rg.up.set(reply(200, "v1", "Vary", "Accept-Language"))
		for _, lang := range []string{"en", "fr"} {
			rg.serve(t, get("stories/1", "X-Tenant", "acme", "Accept-Language", lang))
		}
		head := get("stories/1", "X-Tenant", "acme", "Accept-Language", "en")
		head.Method = http.MethodHead
		rg.serve(t, head)
		rg.serve(t, get("stories/1", "X-Tenant", "other"))
		rg.serve(t, get("stories/2", "X-Tenant", "acme"))

		n, err := rg.engine.PurgeURL(context.Background(), get("stories/1"), "acme")
		if err != nil || n != 3+2 {
			t.Fatalf("PurgeURL = %d, %v; want 3 answers here (en, fr, HEAD) + 2 from the hook", n, err)
		}
		rg.up.set(reply(200, "v2", "Vary", "Accept-Language"))
		for _, lang := range []string{"en", "fr"} {
			wantResult(t, rg.serve(t, get("stories/1", "X-Tenant", "acme", "Accept-Language", lang)), Miss, "v2")
		}
		if res := rg.serve(t, head).Result; res != Miss {
			t.Fatalf("HEAD after the purge: %s, want MISS", res)
		}
		wantResult(t, rg.serve(t, get("stories/1", "X-Tenant", "other")), Hit, "v1")
		wantResult(t, rg.serve(t, get("stories/2", "X-Tenant", "acme")), Hit, "v1")
		if want := []string{routingKey(rt, get("stories/1", "X-Tenant", "acme"))}; !slices.Equal(hook.scopes, want) {
			t.Fatalf("OnPurge got %q, want %q", hook.scopes, want)
		}
		if hook.life[0] < rt.Fresh+rt.Stale+rt.StaleIfError {
			t.Fatalf("tombstone for %v, shorter than the route keeps an answer", hook.life[0])
		}
	})
}

// TestPurgeRouteRemovesOnlyItsRoute: a route's purge removes every answer
// of every URL and tenant of the route, and nothing of another route, even
// one whose name starts with the purged one's.
func TestPurgeRouteRemovesOnlyItsRoute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt, other := testRoute(), testRoute()
		other.Name, other.Prefix = "comments2", "/comments2/"
		rg := newRig(t, rt, other)
		var hook purgeHook
		hook.install(rg.engine, 0)
		paths := []string{"stories/1", "stories/2?a=1", "stories/3"}
		for _, p := range paths {
			rg.serve(t, get(p, "X-Tenant", "acme"))
			o := get(p)
			o.Route = other.Name
			rg.serve(t, o)
		}
		n, err := rg.engine.PurgeRoute(context.Background(), rt.Name)
		if err != nil || n != len(paths) {
			t.Fatalf("PurgeRoute = %d, %v; want %d", n, err, len(paths))
		}
		rg.up.set(reply(200, "v2"))
		for _, p := range paths {
			wantResult(t, rg.serve(t, get(p, "X-Tenant", "acme")), Miss, "v2")
			o := get(p)
			o.Route = other.Name
			wantResult(t, rg.serve(t, o), Hit, "hello")
		}
		if !slices.Equal(hook.scopes, []string{RouteScope(rt.Name)}) {
			t.Fatalf("OnPurge got %q, want the route's scope", hook.scopes)
		}
	})
}

// TestReadInFlightDuringARoutePurgeIsSentAgain: a read that began before a
// route's purge and ends after it is not stored as it came back (it may
// predate what the purge was for): it is sent again, as a read overtaken
// by a write is (guarded.go), and the later answer is stored.
func TestReadInFlightDuringARoutePurgeIsSentAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := testRoute()
		rg := newRig(t, rt)
		rg.up.set(reply(200, "before"))
		rg.up.hold()
		var wg sync.WaitGroup
		var got *Response
		wg.Go(func() { got = rg.serve(t, get("stories/1")) })
		synctest.Wait() // the read is at the upstream
		if _, err := rg.engine.PurgeRoute(context.Background(), rt.Name); err != nil {
			t.Fatal(err)
		}
		rg.up.set(reply(200, "after"))
		time.Sleep(time.Millisecond) // the answer sent again comes back after the purge
		rg.up.release()
		wg.Wait()
		wantResult(t, got, Miss, "after")
		wantResult(t, rg.serve(t, get("stories/1")), Hit, "after")
		if rg.calls() != 2 {
			t.Fatalf("%d upstream calls, want 2 (the read sent again)", rg.calls())
		}
	})
}

// TestOlderCopyIsRefusedAfterAPurge: after a purge, a copy stored before it
// (a late replication push, a hand-off, a recovered entry) is refused by
// Put, under a URL purge and a route purge alike; one stored after is kept.
func TestOlderCopyIsRefusedAfterAPurge(t *testing.T) {
	tests := []struct {
		name  string
		purge func(e *Engine) error
	}{
		{"URL", func(e *Engine) error { _, err := e.PurgeURL(context.Background(), get("stories/1"), ""); return err }},
		{"route", func(e *Engine) error { _, err := e.PurgeRoute(context.Background(), "comments"); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := testRoute()
				rg := newRig(t, rt)
				pkey := primaryKey(rt, get("stories/1"))
				old := store.NewEntry(200, http.Header{}, []byte("old"), time.Now(), store.Windows{Fresh: time.Hour})
				time.Sleep(time.Second)
				if err := tt.purge(rg.engine); err != nil {
					t.Fatal(err)
				}
				rg.engine.Put(pkey, old)
				if _, ent := rg.engine.Lookup(pkey, http.Header{}); ent != nil {
					t.Fatalf("an answer older than the purge came back: %q", ent.Body)
				}
				time.Sleep(time.Second)
				rg.engine.Put(pkey, store.NewEntry(200, http.Header{}, []byte("new"), time.Now(), store.Windows{Fresh: time.Hour}))
				if _, ent := rg.engine.Lookup(pkey, http.Header{}); ent == nil || string(ent.Body) != "new" {
					t.Fatalf("an answer newer than the purge was refused: %v", ent)
				}
			})
		})
	}
}

// TestPurgeRefusesWhatNoRequestCouldName: a purge is held to the rules a
// request of the route is held to, so that it names a key the engine could
// have stored; a tenant the route cannot have is refused rather than
// purging nothing.
func TestPurgeRefusesWhatNoRequestCouldName(t *testing.T) {
	keyed := testRoute()
	keyed.Name, keyed.Prefix, keyed.TenantHeader = "keyed", "/keyed/", ""
	keyed.TenantKeyHeader, keyed.TenantKeys = "Authorization", map[string]string{KeyHash("Bearer k1"): "acme"}
	plain := testRoute()
	plain.Name, plain.Prefix, plain.TenantHeader = "plain", "/plain/", ""
	required := testRoute()
	required.Name, required.Prefix, required.TenantRequired = "required", "/required/", true
	tests := []struct {
		name   string
		route  string
		path   string
		tenant string
		want   error // nil: accepted
	}{
		{"a URL and tenant", "comments", "stories/1?a=1", "acme", nil},
		{"no tenant", "comments", "stories/1", "", nil},
		{"unknown route", "nope", "stories/1", "", ErrUnknownRoute},
		{"dot segment", "comments", "a/%2e%2e/b", "", ErrBadRequest},
		{"control character in query", "comments", "a?x=\x01", "", ErrBadRequest},
		{"two tenants in one", "comments", "a", "acme,globex", ErrBadRequest},
		{"a tenant on a route without tenants", "plain", "a", "acme", ErrBadRequest},
		{"no tenant where one is required", "required", "a", "", ErrBadRequest},
		{"a tenant of the route's keys", "keyed", "a", "acme", nil},
		{"a tenant none of its keys names", "keyed", "a", "globex", ErrBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rg := newRig(t, testRoute(), keyed, plain, required)
			r := get(tt.path)
			r.Route = tt.route
			_, err := rg.engine.PurgeURL(context.Background(), r, tt.tenant)
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("PurgeURL = %v, want %v", err, tt.want)
			}
		})
	}
}

// TestScopes: a route's scope covers every routing key of that route and
// no other; a URL's routing key covers only itself.
func TestScopes(t *testing.T) {
	rt := testRoute()
	rkey := routingKey(rt, get("stories/1", "X-Tenant", "acme"))
	tests := []struct {
		scope, rkey string
		want        bool
	}{
		{RouteScope("comments"), rkey, true},
		{RouteScope("comment"), rkey, false},
		{RouteScope("comments2"), rkey, false},
		{rkey, rkey, true},
		{rkey, routingKey(rt, get("stories/1", "X-Tenant", "acme2")), false},
	}
	for _, tt := range tests {
		if got := InScope(tt.scope, tt.rkey); got != tt.want {
			t.Errorf("InScope(%q, %q) = %v, want %v", tt.scope, tt.rkey, got, tt.want)
		}
	}
	if RouteWide(rkey) || !RouteWide(RouteScope("comments")) {
		t.Fatal("RouteWide confuses a routing key with a route's scope")
	}
	if got := ScopeKeys(RouteScope("comments")); !slices.Equal(got, []string{"comments"}) {
		t.Fatalf("ScopeKeys(route) = %q", got)
	}
	if got := ScopeKeys(rkey); !slices.Equal(got, CachedKeys(rkey)) {
		t.Fatalf("ScopeKeys(URL) = %q, want CachedKeys", got)
	}
}
