package api

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/levee/levee/peer"
)

// fakeSource answers lookups from a map of primary key to entry and
// records the headers it was given.
type fakeSource struct {
	mu      sync.Mutex
	entries map[string]*peer.Entry
	headers []http.Header
}

func (f *fakeSource) LookupReplica(pkey string, h http.Header) (*peer.Entry, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.headers = append(f.headers, h)
	e, ok := f.entries[pkey]
	return e, ok
}

func TestPeerLookup(t *testing.T) {
	const secret = "peer-lookup-secret"
	src := &fakeSource{entries: map[string]*peer.Entry{
		"have":   {Key: "have\x00X-Tenant=acme", Status: 200, Body: []byte("copy"), StoredAt: 5, ErrorUntil: 50},
		"marker": {Key: "marker", StoredAt: 5},
	}}
	s := newTestServer(t, &fakeEngine{resp: okResponse()}, nil)
	s.EnablePeers(PeerConfig{Token: peer.Token(secret), Lookups: src})
	srv := httptest.NewServer(s)
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	cases := []struct {
		name      string
		secret    string
		key       string
		wantFound bool
		wantErr   bool
	}{
		{"found", secret, "have", true, false},
		{"not found", secret, "missing", false, false},
		{"a marker is never an answer", secret, "marker", false, false},
		{"wrong secret refused", "not-the-cluster-secret", "have", false, true},
		{"empty key refused", secret, "", false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cl := peer.NewClient(peer.ClientConfig{Self: "n3", Secret: tc.secret})
			defer cl.Close()
			req := &peer.LookupRequest{Key: tc.key, Header: map[string][]string{"X-Tenant": {"acme"}, "Connection": {"close"}}}
			e, found, err := cl.Lookup(context.Background(), addr, req)
			if tc.wantErr {
				if !errors.Is(err, peer.ErrUnreachable) {
					t.Fatalf("Lookup err %v, want ErrUnreachable", err)
				}
				return
			}
			if err != nil || found != tc.wantFound {
				t.Fatalf("Lookup = found %v, err %v; want found %v", found, err, tc.wantFound)
			}
			if found && (!bytes.Equal(e.Body, []byte("copy")) || e.Key != src.entries["have"].Key || e.ErrorUntil != 50) {
				t.Fatalf("Lookup entry %+v, want the source's", e)
			}
		})
	}
	src.mu.Lock()
	defer src.mu.Unlock()
	if h := src.headers[0]; h.Get("X-Tenant") != "acme" || h.Get("Connection") != "" {
		t.Fatalf("source got headers %v, want the request's, cleaned", h)
	}
}

func TestPeerLookupDisabledWithoutSource(t *testing.T) {
	s := newTestServer(t, &fakeEngine{resp: okResponse()}, nil)
	s.EnablePeers(PeerConfig{})
	w := httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest(http.MethodPost, peer.PathLookup, nil))
	if w.Code != http.StatusNotFound {
		t.Fatalf("lookup without a source: %d, want 404", w.Code)
	}
}
