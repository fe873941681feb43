package replica

import (
	"bytes"
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/levee/levee/peer"
	"github.com/levee/levee/store"
)

// fakeEngine holds entries by key and records the headers of lookups.
type fakeEngine struct {
	mu      sync.Mutex
	entries map[string]*store.Entry
	headers []http.Header
}

func (f *fakeEngine) Put(key string, e *store.Entry) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if old, ok := f.entries[key]; ok && old.StoredAt.After(e.StoredAt) {
		return false
	}
	f.entries[key] = e
	return true
}

func (f *fakeEngine) Lookup(pkey string, h http.Header) (string, *store.Entry) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.headers = append(f.headers, h)
	return pkey, f.entries[pkey]
}

func (f *fakeEngine) Current(pkey, key string, stored time.Time) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e, ok := f.entries[key]; ok && e.StoredAt.Equal(stored) {
		return time.Minute
	}
	return 0
}

// countingObserver counts replication events by direction and outcome.
type countingObserver struct {
	mu sync.Mutex
	n  map[string]int
}

func (o *countingObserver) ReplicationEvent(dir, outcome string, n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n == nil {
		o.n = map[string]int{}
	}
	o.n[dir+"/"+outcome] += n
}
func (o *countingObserver) NearCacheLookup(r string) { o.ReplicationEvent("near", r, 1) }
func (o *countingObserver) NearCacheRenewal(outcome string, n int) {
	o.ReplicationEvent("renew", outcome, n)
}
func (o *countingObserver) ForwardOutcome(owner, outcome string) {
	o.ReplicationEvent("forward", outcome, 1)
}
func (o *countingObserver) Invalidation(dir, outcome string, n int) {
	o.ReplicationEvent("invalidate-"+dir, outcome, n)
}
func (o *countingObserver) get(k string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n[k]
}

func encode(t testing.TB, v any) []byte {
	t.Helper()
	b, err := peer.Encode(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestServeLookup(t *testing.T) {
	eng := &fakeEngine{entries: map[string]*store.Entry{
		"have":   {Status: 200, Body: []byte("copy"), StoredAt: time.Unix(0, 5), ErrorUntil: time.Unix(0, 50)},
		"marker": {StoredAt: time.Unix(0, 5)},
	}}
	s := NewServer(eng, nil)
	cases := []struct {
		name      string
		key       string
		wantFound bool
		wantErr   bool
	}{
		{"found", "have", true, false},
		{"not found", "missing", false, false},
		{"a marker is never an answer", "marker", false, false},
		{"empty key refused", "", false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := &peer.LookupRequest{V: peer.Version, From: "n3", Key: tc.key,
				Header: map[string][]string{"X-Tenant": {"acme"}, "Connection": {"close"}, "X-Levee-Owner": {"n9"}}}
			b, err := s.ServeLookup(context.Background(), encode(t, req))
			if tc.wantErr {
				if err == nil {
					t.Fatal("ServeLookup accepted the request")
				}
				return
			}
			var resp peer.LookupResponse
			if err != nil || peer.Decode(b, &resp) != nil {
				t.Fatalf("ServeLookup = %v; reply undecodable", err)
			}
			if resp.Found != tc.wantFound {
				t.Fatalf("found %v, want %v", resp.Found, tc.wantFound)
			}
			if resp.Found && (!bytes.Equal(resp.Entry.Body, []byte("copy")) || resp.Entry.Key != "have" || resp.Entry.ErrorUntil != 50) {
				t.Fatalf("entry %+v, want the engine's", resp.Entry)
			}
		})
	}
	if h := eng.headers[0]; h.Get("X-Tenant") != "acme" || h.Get("Connection") != "" || h.Get("X-Levee-Owner") != "" {
		t.Fatalf("engine got headers %v, want the request's, cleaned", h)
	}
}

func TestServeReplicateKeepsTheNewer(t *testing.T) {
	eng := &fakeEngine{entries: map[string]*store.Entry{}}
	obs := &countingObserver{}
	s := NewServer(eng, obs)
	push := func(stored int64, body string) error {
		_, err := s.ServeReplicate(context.Background(), encode(t, &peer.Entry{V: peer.Version, Key: "k", Status: 200,
			Body: []byte(body), StoredAt: stored, ErrorUntil: stored + 100}))
		return err
	}
	if err := push(10, "new"); err != nil {
		t.Fatal(err)
	}
	if err := push(5, "old"); err != nil {
		t.Fatal(err)
	}
	if got := string(eng.entries["k"].Body); got != "new" {
		t.Fatalf("held %q, want the newer push", got)
	}
	if obs.get("received/ok") != 1 || obs.get("received/stale") != 1 {
		t.Fatalf("counts %v, want one ok and one stale", obs.n)
	}
	if _, err := s.ServeReplicate(context.Background(), []byte{0xc1}); err == nil {
		t.Fatal("garbage accepted")
	}
}

// FuzzServe feeds arbitrary bytes to both handlers: each refuses or
// answers, never panics, and a lookup's reply always decodes.
func FuzzServe(f *testing.F) {
	f.Add(encode(f, &peer.Entry{V: peer.Version, Key: "k", Status: 200, Body: []byte("b")}))
	f.Add(encode(f, &peer.LookupRequest{V: peer.Version, Key: "k", Header: map[string][]string{"A": {"b"}}}))
	f.Add([]byte{0xc6, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		eng := &fakeEngine{entries: map[string]*store.Entry{"k": {Status: 200, Body: []byte("x"), StoredAt: time.Unix(0, 5)}}}
		s := NewServer(eng, nil)
		_, _ = s.ServeReplicate(context.Background(), b)
		reply, err := s.ServeLookup(context.Background(), b)
		if err != nil {
			return
		}
		var resp peer.LookupResponse
		if err := peer.Decode(reply, &resp); err != nil {
			t.Fatalf("reply to %x does not decode: %v", b, err)
		}
	})
}
