package store

import (
	"net/http"
	"reflect"
	"testing"
	"time"
)

// TestPackedKeepsContent: the cache's copy reads exactly as the entry set,
// nil and empty parts included, and the entry set is left as it was.
func TestPackedKeepsContent(t *testing.T) {
	tests := []struct {
		name string
		e    *Entry
	}{
		{"zero", &Entry{}},
		{"nil header, empty body", &Entry{Status: 204, Body: []byte{}}},
		{"empty header", &Entry{Status: 200, Header: http.Header{}}},
		{"nil and empty value lists", &Entry{Header: http.Header{"A": nil, "B": {}, "C": {""}}}},
		{"answer", &Entry{Status: 200, StoredAt: t0, FreshUntil: t0.Add(time.Minute), Body: append(make([]byte, 0, 64), "body"...),
			Header: http.Header{"Etag": {`"v1"`}, "Vary": {"Accept", "X-Tenant"}, "Cache-Control": {"max-age=60"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, capBefore := tt.e.Clone(), cap(tt.e.Body)
			p := packed(tt.e)
			if !reflect.DeepEqual(p, tt.e) {
				t.Errorf("packed = %+v, want %+v", p, tt.e)
			}
			if !reflect.DeepEqual(tt.e, before) || cap(tt.e.Body) != capBefore {
				t.Errorf("entry set changed to %+v", tt.e)
			}
			if cap(p.Body) != len(p.Body) {
				t.Errorf("packed body len %d cap %d, want no spare capacity", len(p.Body), cap(p.Body))
			}
		})
	}
}

// TestPackedValuesAreCapped: the values share one backing array, so each
// list must be capped: an append to one must not overwrite the next.
func TestPackedValuesAreCapped(t *testing.T) {
	h := packHeader(http.Header{"A": {"1", "2"}, "B": {"3"}, "C": {"4", "5", "6"}})
	for name, values := range h {
		if cap(values) != len(values) {
			t.Errorf("%s: len %d cap %d", name, len(values), cap(values))
		}
	}
	_ = append(h["A"], "x")
	if got := h["B"][0] + h["C"][0]; got != "34" {
		t.Errorf("after an append to A, B and C start %q, want \"34\"", got)
	}
}

// TestCacheStoresPackedCopy: Get returns the cache's packed copy, equal to
// what was set, weighing what the entry set weighed.
func TestCacheStoresPackedCopy(t *testing.T) {
	c := newTestCache(t, Config{MaxBytes: 1 << 20})
	e := NewEntry(200, http.Header{"Etag": {`"v1"`}}, append(make([]byte, 0, 4096), "body"...), time.Now(), Windows{Fresh: time.Hour})
	c.Set("k", e)
	got, ok := c.Get("k")
	if !ok || !reflect.DeepEqual(got, e) {
		t.Fatalf("Get = %+v, %v; want %+v", got, ok, e)
	}
	if cap(got.Body) != len(got.Body) {
		t.Errorf("stored body cap %d, want %d", cap(got.Body), len(got.Body))
	}
	if st := waitStats(t, c, "weight", func(s Stats) bool { return s.Entries == 1 }); st.Bytes != entryWeight("k", e) {
		t.Errorf("Stats.Bytes = %d, want %d", st.Bytes, entryWeight("k", e))
	}
}
