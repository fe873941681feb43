package proxy

import (
	"net/http"
	"testing"
	"time"

	"github.com/levee/levee/store"
)

// A stored answer read twice from the cache is two Entry values (the cache
// decodes each Get from its record): storedMeanwhile must still see that
// the answer it found is the one its flight started from.
func TestSameStoredComparesTheAnswerNotThePointer(t *testing.T) {
	at := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	w := store.Windows{Fresh: time.Minute, Stale: time.Minute}
	stored := store.NewEntry(200, http.Header{"Etag": {`"a"`}}, []byte("x"), at, w)
	tests := []struct {
		name     string
		cur, old *store.Entry
		want     bool
	}{
		{"a second read of the same answer", stored, store.NewEntry(200, http.Header{"Etag": {`"a"`}}, []byte("x"), at, w), true},
		{"nothing before", stored, nil, false},
		{"an answer stored later", store.NewEntry(200, nil, []byte("y"), at.Add(time.Second), w), stored, false},
		{"the answer renewed with other windows", store.NewEntry(200, nil, []byte("x"), at, store.Windows{Fresh: 2 * time.Minute}), stored, false},
		{"another status at the same instant", store.NewEntry(404, nil, nil, at, w), stored, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sameStored(tt.cur, tt.old); got != tt.want {
				t.Fatalf("sameStored = %v, want %v", got, tt.want)
			}
		})
	}
}
