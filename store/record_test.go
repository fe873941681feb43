package store

import (
	"math"
	"net/http"
	"reflect"
	"slices"
	"testing"
	"time"
)

// TestRecordKeepsTheEntry: an entry encoded into a record decodes to the
// same answer, and the record's accessors read what the entry holds.
func TestRecordKeepsTheEntry(t *testing.T) {
	far := time.Date(2400, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		e    *Entry
		want *Entry // nil: e itself
	}{
		{"zero", &Entry{}, nil},
		{"nil header, empty body", &Entry{Status: 204, Body: []byte{}}, &Entry{Status: 204}},
		{"empty header", &Entry{Status: 200, Header: http.Header{}}, nil},
		{"empty value lists decode as nil", &Entry{Header: http.Header{"A": nil, "B": {}, "C": {""}}},
			&Entry{Header: http.Header{"A": nil, "B": nil, "C": {""}}}},
		{"answer", &Entry{Status: 200, StoredAt: t0, FreshUntil: t0.Add(time.Minute), StaleUntil: t0.Add(2 * time.Minute),
			ErrorUntil: t0.Add(time.Hour), Body: []byte("body"),
			Header: http.Header{"Etag": {`"v1"`}, "Vary": {"Accept", "X-Tenant"}, "Cache-Control": {"max-age=60"}}}, nil},
		{"long value", &Entry{Status: 200, Header: http.Header{"X-Long": {string(make([]byte, 70_000))}}}, nil},
		{"instant past 2262 is clamped", &Entry{Status: 200, StoredAt: t0, FreshUntil: far},
			&Entry{Status: 200, StoredAt: t0, FreshUntil: time.Unix(0, math.MaxInt64)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := tt.want
			if want == nil {
				want = tt.e
			}
			r := newRecord(tt.e)
			if got := r.Entry(); !sameEntry(got, want) {
				t.Errorf("Entry() = %+v, want %+v", got, want)
			}
			if r.Status() != want.Status || !r.StoredAt().Equal(want.StoredAt) || !r.FreshUntil().Equal(want.FreshUntil) ||
				string(r.Body()) != string(want.Body) || !r.deadAt().Equal(want.DeadAt()) {
				t.Errorf("accessors: status %d stored %v fresh %v dead %v body %q", r.Status(), r.StoredAt(), r.FreshUntil(), r.deadAt(), r.Body())
			}
			if len(r.buf) != recordLen(tt.e) || cap(r.buf) != len(r.buf) {
				t.Errorf("buffer len %d cap %d, recordLen %d", len(r.buf), cap(r.buf), recordLen(tt.e))
			}
		})
	}
}

// TestRecordBodyCannotGrowIntoNothing: the body a record hands out has
// no spare capacity, so an append copies instead of writing past it.
func TestRecordBodyHasNoSpareCapacity(t *testing.T) {
	r := newRecord(&Entry{Status: 200, Header: http.Header{"A": {"1"}}, Body: []byte("body")})
	if b := r.Body(); cap(b) != len(b) {
		t.Errorf("Body cap %d, len %d", cap(b), len(b))
	}
}

func TestRecordReadsItsHeaderWithoutDecoding(t *testing.T) {
	r := newRecord(&Entry{Status: 200, Header: http.Header{
		"Etag": {`"v1"`}, "Vary": {"Accept", "X-Tenant"}, "Connection": {"close"}, "Empty": {},
	}})
	t.Run("Value", func(t *testing.T) {
		for name, want := range map[string]string{"Etag": `"v1"`, "Vary": "Accept", "Empty": "", "Missing": "", "etag": ""} {
			if got := r.Value(name); got != want {
				t.Errorf("Value(%q) = %q, want %q", name, got, want)
			}
		}
	})
	t.Run("CopyHeader skips and replaces", func(t *testing.T) {
		dst := http.Header{"Vary": {"old"}, "Kept": {"k"}}
		spare := r.CopyHeader(dst, func(name string) bool { return name == "Connection" }, 2)
		if len(spare) != 0 || cap(spare) < 2 {
			t.Errorf("spare len %d cap %d, want 0 and at least 2", len(spare), cap(spare))
		}
		spare = append(spare, "x", "y") // the caller's own values: must not reach the copied ones
		want := http.Header{"Vary": {"Accept", "X-Tenant"}, "Etag": {`"v1"`}, "Kept": {"k"}}
		if !reflect.DeepEqual(dst, want) {
			t.Errorf("CopyHeader = %v, want %v", dst, want)
		}
		dst.Add("Vary", "Cookie") // capped: must not write into Etag's value
		if got := dst["Etag"]; !slices.Equal(got, []string{`"v1"`}) {
			t.Errorf("an Add to Vary changed Etag: %q", got)
		}
	})
	t.Run("Values", func(t *testing.T) {
		got := map[string][]string{}
		for k, v := range r.Values() {
			got[k] = append(got[k], v)
		}
		want := map[string][]string{"Etag": {`"v1"`}, "Vary": {"Accept", "X-Tenant"}, "Connection": {"close"}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Values = %v, want %v", got, want)
		}
	})
}

// TestRecordFreshnessMatchesTheEntry: the record's windows, kept as
// nanoseconds, put every instant where the entry's own times do.
func TestRecordFreshnessMatchesTheEntry(t *testing.T) {
	entries := []*Entry{windowed(), {}, {StoredAt: t0, FreshUntil: t0.Add(10 * time.Second), StaleUntil: t0.Add(20 * time.Second)}}
	for i, e := range entries {
		r := newRecord(e)
		for _, at := range []time.Duration{-time.Second, 0, 10*time.Second - 1, 10 * time.Second, 20 * time.Second, 30 * time.Second, time.Hour} {
			now := t0.Add(at)
			if got, want := r.Freshness(now), e.Freshness(now); got != want {
				t.Errorf("entry %d at t0%+v: record %v, entry %v", i, at, got, want)
			}
			if got, want := r.Age(now), e.Age(now); got != want {
				t.Errorf("entry %d at t0%+v: record age %v, entry %v", i, at, got, want)
			}
		}
	}
}

// BenchmarkRecordCopyHeader is what a fresh hit spends handing a stored
// header to its answer.
func BenchmarkRecordCopyHeader(b *testing.B) {
	r := newRecord(realEntry(b, 1, t0))
	dst := http.Header{}
	b.ReportAllocs()
	for b.Loop() {
		clear(dst)
		r.CopyHeader(dst, nil, 0)
	}
}
