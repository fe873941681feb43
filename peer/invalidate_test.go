package peer

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"
)

func tomb(rkey string, at, life int64) Tombstone {
	return Tombstone{RoutingKey: rkey, At: at, Until: at + life}
}

func encodeOrFail(t testing.TB, m any) []byte {
	t.Helper()
	b, err := Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeInvalidate(t *testing.T) {
	hour := int64(time.Hour)
	many := make([]Tombstone, MaxTombstones+1)
	for i := range many {
		many[i] = tomb("r\x00k", 1, hour)
	}
	tests := []struct {
		name string
		msg  *Invalidate
		ok   bool
	}{
		{"one tombstone", &Invalidate{V: 1, From: "n1", Tombstones: []Tombstone{tomb("comments\x00a?\x00t=", 5, hour)}}, true},
		{"a full batch", &Invalidate{V: 1, Tombstones: many[:MaxTombstones]}, true},
		{"the longest life", &Invalidate{V: 1, Tombstones: []Tombstone{tomb("k", 1, int64(MaxTombstoneLife))}}, true},
		{"wrong version", &Invalidate{V: 2, Tombstones: []Tombstone{tomb("k", 1, hour)}}, false},
		{"no tombstone", &Invalidate{V: 1}, false},
		{"too many", &Invalidate{V: 1, Tombstones: many}, false},
		{"no routing key", &Invalidate{V: 1, Tombstones: []Tombstone{tomb("", 1, hour)}}, false},
		{"no write time", &Invalidate{V: 1, Tombstones: []Tombstone{tomb("k", 0, hour)}}, false},
		{"ends before the write", &Invalidate{V: 1, Tombstones: []Tombstone{tomb("k", 10, -1)}}, false},
		{"ends at the write", &Invalidate{V: 1, Tombstones: []Tombstone{tomb("k", 10, 0)}}, false},
		{"lives too long", &Invalidate{V: 1, Tombstones: []Tombstone{tomb("k", 1, int64(MaxTombstoneLife)+1)}}, false},
		{"one bad among good", &Invalidate{V: 1, Tombstones: []Tombstone{tomb("k", 1, hour), tomb("", 1, hour)}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got Invalidate
			err := Decode(encodeOrFail(t, tt.msg), &got)
			if tt.ok != (err == nil) {
				t.Fatalf("Decode = %v, want ok = %v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrBadMessage) {
				t.Fatalf("error %v does not wrap ErrBadMessage", err)
			}
			if err == nil && !reflect.DeepEqual(&got, tt.msg) {
				t.Fatalf("round trip: got %+v, want %+v", got, tt.msg)
			}
		})
	}
}

// FuzzDecodeInvalidate: an invalidation is outside bytes. Decoding any
// input either fails with ErrBadMessage, leaving nothing to apply, or
// yields a message every one of whose tombstones is usable, and that
// encodes back to a message decoding to the same tombstones.
func FuzzDecodeInvalidate(f *testing.F) {
	f.Add(encodeOrFail(f, &Invalidate{V: 1, From: "n1", Tombstones: []Tombstone{tomb("comments\x00a?\x00t=", 5, int64(time.Hour))}}))
	f.Add(encodeOrFail(f, &Invalidate{V: 1, Tombstones: []Tombstone{tomb("k", 1, 2), tomb("k2", 3, 4)}}))
	f.Add(encodeOrFail(f, &Invalidate{V: 1}))
	f.Add([]byte{0x81, 0xa5, 't', 'o', 'm', 'b', 's', 0xdd, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		var m Invalidate
		if err := Decode(b, &m); err != nil {
			if !errors.Is(err, ErrBadMessage) {
				t.Fatalf("error %v does not wrap ErrBadMessage", err)
			}
			return
		}
		if len(m.Tombstones) == 0 || len(m.Tombstones) > MaxTombstones {
			t.Fatalf("accepted %d tombstones", len(m.Tombstones))
		}
		for _, ts := range m.Tombstones {
			if ts.RoutingKey == "" || ts.At <= 0 || ts.Until <= ts.At || ts.Until-ts.At > int64(MaxTombstoneLife) {
				t.Fatalf("accepted unusable tombstone %+v", ts)
			}
		}
		var again Invalidate
		if err := Decode(encodeOrFail(t, &m), &again); err != nil || !reflect.DeepEqual(again.Tombstones, m.Tombstones) {
			t.Fatalf("re-encoded message decodes to %+v, %v; want %+v", again.Tombstones, err, m.Tombstones)
		}
	})
}

// TestClientTellsWhetherAMessageWasSent: a caller that would repeat a write
// after a failed call must know whether the peer may have acted on it.
func TestClientTellsWhetherAMessageWasSent(t *testing.T) {
	refused := closedAddr(t)
	tests := []struct {
		name        string
		handler     http.HandlerFunc // nil: nothing listens
		wantNotSent bool
		wantTimeout bool
	}{
		{"connection refused", nil, true, false},
		{"refused before reading: 401", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(401) }, true, false},
		{"no such endpoint: 404", http.NotFound, true, false},
		{"no answer in time", func(_ http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body) // then the server notices the client leave
			<-r.Context().Done()
		}, false, true},
		{"connection dropped after the message", func(w http.ResponseWriter, _ *http.Request) {
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
		}, false, false},
		{"error while serving: 500", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(500) }, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := refused
			if tt.handler != nil {
				srv := httptest.NewServer(tt.handler)
				defer srv.Close()
				addr = strings.TrimPrefix(srv.URL, "http://")
			}
			c := NewClient(ClientConfig{Self: "n1", Timeout: 200 * time.Millisecond})
			defer c.Close()
			err := c.Invalidate(context.Background(), addr, &Invalidate{Tombstones: []Tombstone{tomb("k", 1, 2)}})
			if !errors.Is(err, ErrUnreachable) || errors.Is(err, ErrNotSent) != tt.wantNotSent || errors.Is(err, ErrTimeout) != tt.wantTimeout {
				t.Fatalf("err = %v; want unreachable, not sent %v, timeout %v", err, tt.wantNotSent, tt.wantTimeout)
			}
		})
	}
}

// closedAddr is an address nothing listens on: it was bound, then closed.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
