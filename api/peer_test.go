package api

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/levee/levee/peer"
)

// TestPeerEndpointIsAuthenticatedAndMapped: a mounted endpoint gets the
// body of a call from an authenticated node, its reply is written as
// msgpack, and its error refuses the message with 400; a call on a
// connection that named no node never reaches it.
func TestPeerEndpointIsAuthenticatedAndMapped(t *testing.T) {
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
	h := s.PeerHandler(PeerConfig{Endpoints: []PeerEndpoint{ep}})
	cases := []struct {
		name       string
		sender     string
		body       string
		wantStatus int
		wantBody   string
		wantType   string
	}{
		{"reply written", "n2", "ok", http.StatusOK, "reply", peer.ContentType},
		{"nil reply is an empty 200", "n2", "empty", http.StatusOK, "", ""},
		{"endpoint error is 400", "n2", "bad", http.StatusBadRequest, "", ""},
		{"no authenticated sender refused", "", "ok", http.StatusUnauthorized, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := len(got)
			w := peerCall(h, peer.PathLookup, []byte(tc.body), tc.sender)
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
	h := s.PeerHandler(PeerConfig{})
	for _, path := range []string{peer.PathLookup, peer.PathReplicate} {
		if w := peerCall(h, path, nil, "n2"); w.Code != http.StatusNotFound {
			t.Fatalf("%s without an endpoint: %d, want 404", path, w.Code)
		}
	}
}

// TestTheAppPortServesNoPeerMessage: node-to-node messages are served on
// the internal port only; the app port answers 404 to every one of them,
// with or without a sender, so a captured peer request replayed there does
// nothing.
func TestTheAppPortServesNoPeerMessage(t *testing.T) {
	eng := &fakeEngine{resp: okResponse()}
	s := newTestServer(t, eng, nil)
	s.PeerHandler(PeerConfig{Raft: &countingApplier{}, Endpoints: []PeerEndpoint{{Path: peer.PathLookup, Serve: func(context.Context, []byte) ([]byte, error) {
		t.Error("a peer endpoint was reached through the app port")
		return nil, nil
	}}}})
	body, _ := peer.Encode(&peer.ForwardRequest{V: peer.Version, From: "n2", Route: "comments", Method: "GET", Path: "/comments/1"})
	for _, path := range []string{peer.PathForward, peer.PathLookup, peer.PathRaftApply, peer.PathReplicate, "/-/internal/../internal/forward"} {
		for _, sender := range []string{"", "n2"} {
			r := httptest.NewRequestWithContext(peer.WithSender(t.Context(), sender), http.MethodPost, path, bytes.NewReader(body))
			w := httptest.NewRecorder()
			s.ServeHTTP(w, r)
			if w.Code != http.StatusNotFound && w.Code != http.StatusTemporaryRedirect { // a cleaned path is redirected, then judged
				t.Fatalf("POST %s on the app port: %d, want 404", path, w.Code)
			}
		}
	}
	if n := len(eng.requests()); n != 0 {
		t.Fatalf("the engine served %d requests sent as peer messages to the app port", n)
	}
}

// peerCall posts body to the peer handler as a call from sender ("" for a
// connection that named no node).
func peerCall(h http.Handler, path string, body []byte, sender string) *httptest.ResponseRecorder {
	ctx := context.Background()
	if sender != "" {
		ctx = peer.WithSender(ctx, sender)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequestWithContext(ctx, http.MethodPost, path, bytes.NewReader(body)))
	return w
}

// TestServePeersNamesEachConnectionsSenderAndStopsClean: over a real
// listener, a call on a connection the Sender names is served as from that
// node (HTTP/2, as nodes speak it), one it names no node for is refused
// with 401, and Shutdown leaves no goroutine behind (TestMain's goleak).
func TestServePeersNamesEachConnectionsSenderAndStopsClean(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var named atomic.Bool
	seen := make(chan string, 2)
	s := newTestServer(t, &fakeEngine{resp: okResponse()}, nil)
	ps := s.ServePeers(ln, PeerConfig{
		Sender: func(net.Conn) (string, bool) { return "n2", named.Load() },
		Endpoints: []PeerEndpoint{{Path: peer.PathLookup, Serve: func(ctx context.Context, _ []byte) ([]byte, error) {
			from, _ := peer.Sender(ctx)
			seen <- from
			return peer.Encode(&peer.LookupResponse{V: peer.Version})
		}}},
	})
	defer ps.Shutdown(context.Background())
	for _, tc := range []struct {
		name    string
		named   bool
		wantErr bool
	}{{"named connection", true, false}, {"unnamed connection", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			named.Store(tc.named)
			c := peer.NewClient(peer.ClientConfig{Self: "n2", HTTP2: true, Dial: func(ctx context.Context, addr string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "tcp", addr)
			}})
			defer c.Close()
			_, _, err := c.Lookup(t.Context(), ln.Addr().String(), &peer.LookupRequest{Key: "k"})
			if gotErr := err != nil; gotErr != tc.wantErr {
				t.Fatalf("Lookup err = %v, want error %v", err, tc.wantErr)
			}
			if tc.wantErr && !errors.Is(err, peer.ErrNotSent) {
				t.Fatalf("a refused sender: %v, want ErrNotSent (401 before anything is read)", err)
			}
			if !tc.wantErr {
				if from := <-seen; from != "n2" {
					t.Fatalf("served as from %q, want n2", from)
				}
			}
		})
	}
}

// TestAPeerMessageSpeaksOnlyForItsSender: a forward or a Raft removal
// whose own From names another node than the connection's certificate is
// refused with 400 before it is served.
func TestAPeerMessageSpeaksOnlyForItsSender(t *testing.T) {
	eng := &fakeEngine{resp: okResponse()}
	s := newTestServer(t, eng, nil)
	h := s.PeerHandler(PeerConfig{RaftRemove: refuseRemoval{t}})
	fwd, _ := peer.Encode(&peer.ForwardRequest{V: peer.Version, From: "n3", Route: "comments", Method: "GET", Path: "/comments/1"})
	rm, _ := peer.Encode(&peer.RaftRemove{V: peer.Version, From: "n3", ID: "n1"})
	for path, body := range map[string][]byte{peer.PathForward: fwd, peer.PathRaftRemove: rm} {
		if w := peerCall(h, path, body, "n2"); w.Code != http.StatusBadRequest {
			t.Fatalf("%s from n3 sent by n2: %d, want 400", path, w.Code)
		}
	}
	if n := len(eng.requests()); n != 0 {
		t.Fatalf("the engine served %d forged forwards", n)
	}
}

type refuseRemoval struct{ t *testing.T }

func (r refuseRemoval) RemoveFromPeer(context.Context, string) error {
	r.t.Error("a forged removal reached Raft")
	return nil
}
