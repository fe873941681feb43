package api

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/levee/levee/peer"
)

// TestPeerEndpointIsAuthenticatedAndMapped: a mounted endpoint gets the
// body of an authenticated call, its reply is written as msgpack, and its
// error refuses the message with 400; a call without the cluster token
// never reaches it.
func TestPeerEndpointIsAuthenticatedAndMapped(t *testing.T) {
	const secret = "peer-endpoint-secret"
	var got [][]byte
	ep := PeerEndpoint{Path: peer.PathLookup, Serve: func(_ context.Context, b []byte) ([]byte, error) {
		got = append(got, b)
		switch string(b) {
		case "bad":
			return nil, errors.New("undecodable")
		case "empty":
			return nil, nil
		}
		return []byte("reply"), nil
	}}
	s := newTestServer(t, &fakeEngine{resp: okResponse()}, nil)
	s.EnablePeers(PeerConfig{Token: peer.Token(secret), Endpoints: []PeerEndpoint{ep}})
	cases := []struct {
		name       string
		token      string
		body       string
		wantStatus int
		wantBody   string
		wantType   string
	}{
		{"reply written", peer.Token(secret), "ok", http.StatusOK, "reply", peer.ContentType},
		{"nil reply is an empty 200", peer.Token(secret), "empty", http.StatusOK, "", ""},
		{"endpoint error is 400", peer.Token(secret), "bad", http.StatusBadRequest, "", ""},
		{"wrong token refused", peer.Token("other"), "ok", http.StatusUnauthorized, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := len(got)
			r := httptest.NewRequest(http.MethodPost, peer.PathLookup, bytes.NewReader([]byte(tc.body)))
			r.Header.Set(peer.HeaderAuth, tc.token)
			w := httptest.NewRecorder()
			s.ServeHTTP(w, r)
			if w.Code != tc.wantStatus {
				t.Fatalf("status %d, want %d (%s)", w.Code, tc.wantStatus, w.Body)
			}
			if tc.wantStatus == http.StatusOK && (w.Body.String() != tc.wantBody || w.Header().Get("Content-Type") != tc.wantType) {
				t.Fatalf("body %q type %q, want %q %q", w.Body, w.Header().Get("Content-Type"), tc.wantBody, tc.wantType)
			}
			if reached := len(got) > before; reached != (tc.wantStatus != http.StatusUnauthorized) {
				t.Fatalf("endpoint reached %v for status %d", reached, tc.wantStatus)
			}
		})
	}
}

func TestPeerEndpointNotMountedIs404(t *testing.T) {
	s := newTestServer(t, &fakeEngine{resp: okResponse()}, nil)
	s.EnablePeers(PeerConfig{})
	for _, path := range []string{peer.PathLookup, peer.PathReplicate} {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(http.MethodPost, path, nil))
		if w.Code != http.StatusNotFound {
			t.Fatalf("%s without an endpoint: %d, want 404", path, w.Code)
		}
	}
}
