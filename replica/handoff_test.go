package replica

import (
	"fmt"
	"testing"
	"time"

	"github.com/levee/levee/peer"
)

func handoffEntry(key string, stored int64, body []byte) *peer.Entry {
	return &peer.Entry{RoutingKey: "rk-" + key, Key: key, Status: 200, Body: body,
		StoredAt: stored, ErrorUntil: stored + int64(time.Hour)}
}

func TestHandoffBounds(t *testing.T) {
	d := DefaultConfig()
	big := make([]byte, 1<<20)
	cases := []struct {
		name        string
		n           int
		body        []byte
		wantLen     int
		wantDropped int
	}{
		{"under the bounds", 100, nil, 100, 0},
		{"entry bound", d.HandoffMaxEntries + 5, nil, d.HandoffMaxEntries, 5},
		{"byte bound", 70, big, 63, 7},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHandoff(d.HandoffMaxEntries, d.HandoffMaxBytes)
			dropped := 0
			for i := range tc.n {
				dropped += h.add(handoffEntry(fmt.Sprint(i), int64(i+1), tc.body))
			}
			if h.len() != tc.wantLen || dropped != tc.wantDropped {
				t.Fatalf("len %d dropped %d, want %d and %d", h.len(), dropped, tc.wantLen, tc.wantDropped)
			}
			if _, ok := h.items["0"]; ok && tc.wantDropped > 0 {
				t.Fatal("the oldest entry survived a drop")
			}
		})
	}
}

func TestHandoffDue(t *testing.T) {
	now := time.Unix(0, 1000)
	place := func(string) []string { return []string{"n1", "n2"} }
	d := DefaultConfig()
	h := newHandoff(d.HandoffMaxEntries, d.HandoffMaxBytes)
	h.add(handoffEntry("k", 10, []byte("new")))
	h.add(handoffEntry("k", 5, []byte("old"))) // older: ignored
	dead := handoffEntry("dead", 1, nil)
	dead.ErrorUntil = 999
	h.add(dead)

	pushes, expired := h.due(now, place)
	if expired != 1 || len(pushes) != 2 || string(pushes[0].entry.Body) != "new" {
		t.Fatalf("due = %d pushes (%v), %d expired; want the newer entry to n1 and n2, 1 expired", len(pushes), pushes, expired)
	}
	h.delivered(pushes[0].entry, "n1")
	h.delivered(pushes[1].entry, "n2")
	if pushes, _ = h.due(now, place); len(pushes) != 0 {
		t.Fatalf("after delivery %d pushes due, want 0", len(pushes))
	}
	h.forget("n2") // it rejoined, maybe empty
	if pushes, _ = h.due(now, place); len(pushes) != 1 || pushes[0].member != "n2" {
		t.Fatalf("after n2 rejoined: %v, want one push to n2", pushes)
	}
	h.add(handoffEntry("k", 20, []byte("newer")))
	if pushes, _ = h.due(now, place); len(pushes) != 2 {
		t.Fatalf("a newer entry is owed to everyone: %d pushes, want 2", len(pushes))
	}
}
