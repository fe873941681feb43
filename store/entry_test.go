package store

import (
	"bytes"
	"net/http"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// windowed returns an entry stored at t0: fresh 10s, stale 10s, stale-if-error 10s.
func windowed() *Entry {
	return NewEntry(200, http.Header{"Etag": {`"v1"`}}, []byte("body"), t0,
		Windows{Fresh: 10 * time.Second, Stale: 10 * time.Second, StaleIfError: 10 * time.Second})
}

func TestFreshness(t *testing.T) {
	e := windowed()
	noErr := &Entry{StoredAt: t0, FreshUntil: t0.Add(10 * time.Second), StaleUntil: t0.Add(20 * time.Second)}
	errShort := &Entry{StoredAt: t0, FreshUntil: t0.Add(10 * time.Second), StaleUntil: t0.Add(20 * time.Second), ErrorUntil: t0.Add(15 * time.Second)}
	tests := []struct {
		name string
		e    *Entry
		at   time.Duration // since t0
		want Freshness
	}{
		{"before store", e, -time.Second, Fresh},
		{"at store", e, 0, Fresh},
		{"just before fresh end", e, 10*time.Second - 1, Fresh},
		{"at fresh end", e, 10 * time.Second, Stale},
		{"just before stale end", e, 20*time.Second - 1, Stale},
		{"at stale end", e, 20 * time.Second, Expired},
		{"just before error end", e, 30*time.Second - 1, Expired},
		{"at error end", e, 30 * time.Second, Dead},
		{"long after", e, time.Hour, Dead},
		{"no error window: at stale end", noErr, 20 * time.Second, Dead},
		{"error end before stale end: stale", errShort, 16 * time.Second, Stale},
		{"error end before stale end: dead after stale", errShort, 20 * time.Second, Dead},
		{"zero entry", &Entry{}, 0, Dead},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.e.Freshness(t0.Add(tt.at)); got != tt.want {
				t.Errorf("Freshness(t0%+v) = %v, want %v", tt.at, got, tt.want)
			}
		})
	}
}

func TestFreshnessString(t *testing.T) {
	tests := []struct {
		f    Freshness
		want string
	}{
		{Fresh, "fresh"}, {Stale, "stale"}, {Expired, "expired"}, {Dead, "dead"},
		{Freshness(-1), "unknown"}, {Freshness(4), "unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.f.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDeadAt(t *testing.T) {
	tests := []struct {
		name string
		e    *Entry
		want time.Time
	}{
		{"chained windows", windowed(), t0.Add(30 * time.Second)},
		{"stale latest", &Entry{FreshUntil: t0, StaleUntil: t0.Add(time.Minute), ErrorUntil: t0.Add(time.Second)}, t0.Add(time.Minute)},
		{"fresh latest", &Entry{FreshUntil: t0.Add(time.Hour)}, t0.Add(time.Hour)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.e.DeadAt(); !got.Equal(tt.want) {
				t.Errorf("DeadAt() = %v, want %v", got, tt.want)
			}
			if f := tt.e.Freshness(tt.want); f != Dead {
				t.Errorf("Freshness(DeadAt) = %v, want dead", f)
			}
			if f := tt.e.Freshness(tt.want.Add(-1)); f == Dead {
				t.Errorf("Freshness(DeadAt-1ns) = dead, want alive")
			}
		})
	}
}

func TestAge(t *testing.T) {
	e := windowed()
	tests := []struct {
		name string
		at   time.Duration
		want time.Duration
	}{
		{"at store", 0, 0},
		{"later", 42 * time.Second, 42 * time.Second},
		{"clock stepped back", -5 * time.Second, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := e.Age(t0.Add(tt.at)); got != tt.want {
				t.Errorf("Age = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestNewEntryWindows(t *testing.T) {
	tests := []struct {
		name                string
		w                   Windows
		fresh, stale, error time.Duration // deadlines since t0
	}{
		{"reference route", Windows{Fresh: 15 * time.Second, Stale: 15 * time.Second, StaleIfError: time.Hour}, 15 * time.Second, 30 * time.Second, time.Hour + 30*time.Second},
		{"no stale", Windows{Fresh: time.Minute}, time.Minute, time.Minute, time.Minute},
		{"negative clamps to zero", Windows{Fresh: -time.Second, Stale: time.Second, StaleIfError: -time.Hour}, 0, time.Second, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := NewEntry(200, nil, nil, t0, tt.w)
			assertDeadlines(t, e, t0, tt.fresh, tt.stale, tt.error)
		})
	}
}

func assertDeadlines(t *testing.T, e *Entry, base time.Time, fresh, stale, errEnd time.Duration) {
	t.Helper()
	if !e.StoredAt.Equal(base) {
		t.Errorf("StoredAt = %v, want %v", e.StoredAt, base)
	}
	for _, d := range []struct {
		name string
		got  time.Time
		want time.Duration
	}{{"FreshUntil", e.FreshUntil, fresh}, {"StaleUntil", e.StaleUntil, stale}, {"ErrorUntil", e.ErrorUntil, errEnd}} {
		if !d.got.Equal(base.Add(d.want)) {
			t.Errorf("%s = base%+v, want base%+v", d.name, d.got.Sub(base), d.want)
		}
	}
}

func TestRenewed(t *testing.T) {
	old := NewEntry(200, http.Header{
		"Etag":           {`"v1"`},
		"Content-Type":   {"application/json"},
		"Content-Length": {"4"},
		"Cache-Control":  {"max-age=10"},
		"X-Multi":        {"a", "b"},
	}, []byte("body"), t0, Windows{Fresh: time.Second})
	now := t0.Add(time.Hour)
	hdr := http.Header{
		"Etag":           {`"v2"`},
		"Cache-Control":  {"max-age=60"},
		"X-Multi":        {"c"},
		"Content-Length": {"0"},
		"Connection":     {"X-Hop"},
		"X-Hop":          {"secret"},
		"Keep-Alive":     {"timeout=5"},
		"Date":           {"Mon, 30 Nov 2026 04:00:00 GMT"},
	}
	r := old.Renewed(now, 15*time.Second, 15*time.Second, time.Minute, hdr)

	assertDeadlines(t, r, now, 15*time.Second, 30*time.Second, 90*time.Second)
	if r.Status != 200 || string(r.Body) != "body" {
		t.Errorf("status/body = %d %q, want 200 \"body\"", r.Status, r.Body)
	}
	want := http.Header{
		"Etag":           {`"v2"`},
		"Content-Type":   {"application/json"},
		"Content-Length": {"4"},
		"Cache-Control":  {"max-age=60"},
		"X-Multi":        {"c"},
		"Date":           {"Mon, 30 Nov 2026 04:00:00 GMT"},
	}
	assertHeader(t, r.Header, want)
	if got := old.Header.Get("Etag"); got != `"v1"` || !old.StoredAt.Equal(t0) {
		t.Errorf("original changed: Etag %s StoredAt %v", got, old.StoredAt)
	}
	r.Body[0] = 'X'
	hdr["X-Multi"][0] = "mutated"
	if string(old.Body) != "body" || r.Header.Get("X-Multi") != "c" {
		t.Error("renewed entry shares memory with the original or with the 304's header")
	}
}

func TestRenewedNilHeader(t *testing.T) {
	old := &Entry{Status: 204}
	r := old.Renewed(t0, time.Second, 0, 0, http.Header{"Etag": {`"x"`}})
	if r.Header.Get("Etag") != `"x"` || old.Header != nil {
		t.Errorf("renewed header = %v, original %v", r.Header, old.Header)
	}
}

func assertHeader(t *testing.T, got, want http.Header) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("header = %v, want %v", got, want)
		return
	}
	for k, wv := range want {
		gv := got[k]
		if len(gv) != len(wv) {
			t.Errorf("%s = %q, want %q", k, gv, wv)
			continue
		}
		for i := range wv {
			if gv[i] != wv[i] {
				t.Errorf("%s = %q, want %q", k, gv, wv)
			}
		}
	}
}

func TestSizeIsTheRecordAndItsBufferAsAllocated(t *testing.T) {
	hdr := http.Header{"X-Long": {string(make([]byte, 500))}}
	tests := []struct {
		name string
		e    *Entry
		buf  int64 // the buffer's allocation: a 2-byte empty header block, then the body
	}{
		{"empty", &Entry{Status: 200}, 16},
		{"body in its size class", &Entry{Status: 200, Body: make([]byte, 100)}, 112},
		{"1 KiB and one byte", &Entry{Status: 200, Body: make([]byte, 1025)}, 1152},
		{"spare capacity is not counted", &Entry{Status: 200, Body: make([]byte, 1025, 4096)}, 1152},
		{"large body in pages", &Entry{Status: 200, Body: make([]byte, 40_000)}, 40_960},
		{"one header value", &Entry{Status: 200, Header: hdr}, 512}, // 2 counts, name, count, 2-byte length, value
	}
	if recordBytes != 64 {
		t.Errorf("recordBytes = %d, want 64", recordBytes)
	}
	for _, tt := range tests {
		if got := tt.e.Size(); got != recordBytes+tt.buf {
			t.Errorf("%s: Size %d, want %d", tt.name, got, recordBytes+tt.buf)
		}
		if r := newRecord(tt.e); allocSize(cap(r.buf)) != tt.buf {
			t.Errorf("%s: record buffer of %d bytes, Size counts %d", tt.name, cap(r.buf), tt.buf)
		}
	}
}

func TestAllocSize(t *testing.T) {
	// Go's size classes (runtime/sizeclasses.go) the rounding must land on.
	tests := []struct{ n, want int }{
		{0, 0}, {1, 16}, {17, 32}, {100, 112}, {129, 144}, {200, 208}, {300, 320},
		{1024, 1024}, {1025, 1152}, {1153, 1280}, {2049, 2304}, {32 << 10, 32 << 10}, {32<<10 + 1, 40 << 10},
	}
	for _, tt := range tests {
		if got := allocSize(tt.n); got != int64(tt.want) {
			t.Errorf("allocSize(%d) = %d, want %d", tt.n, got, tt.want)
		}
	}
}

func TestClone(t *testing.T) {
	e := windowed()
	c := e.Clone()
	c.Body[0] = 'X'
	c.Header.Set("Etag", "changed")
	c.Status = 500
	if !bytes.Equal(e.Body, []byte("body")) || e.Header.Get("Etag") != `"v1"` || e.Status != 200 {
		t.Errorf("original changed through clone: %+v", e)
	}
	if !c.FreshUntil.Equal(e.FreshUntil) || !c.ErrorUntil.Equal(e.ErrorUntil) {
		t.Error("clone lost deadlines")
	}
	if z := (&Entry{}).Clone(); z.Body != nil || z.Header != nil {
		t.Errorf("clone of zero entry = %+v, want zero", z)
	}
}

// TestRenewedAgeIsThe304s: the stored Age was the first answer's when it
// came; a renewed entry is as old as the 304 says, or new.
func TestRenewedAgeIsThe304s(t *testing.T) {
	now := time.Unix(1700000000, 0)
	old := &Entry{Status: 200, Header: http.Header{"Age": {"50"}, "Etag": {`"v1"`}}, StoredAt: now.Add(-time.Hour)}
	tests := []struct {
		name string
		hdr  http.Header
		want []string
	}{
		{"a 304 without Age", http.Header{"Etag": {`"v1"`}}, nil},
		{"a 304 with its Age", http.Header{"Age": {"3"}}, []string{"3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := old.Renewed(now, time.Minute, 0, 0, tt.hdr)
			if got := r.Header["Age"]; !slices.Equal(got, tt.want) {
				t.Fatalf("Age = %q, want %q", got, tt.want)
			}
			if old.Header.Get("Age") != "50" {
				t.Fatal("the stored entry was changed")
			}
		})
	}
}
