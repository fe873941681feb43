package store

import (
	"bytes"
	"net/http"
	"net/textproto"
	"strings"
	"time"
)

// Freshness is where an entry stands in its windows at a given instant.
type Freshness int

const (
	// Fresh entries are served as is: now < FreshUntil.
	Fresh Freshness = iota
	// Stale entries are served while one background refresh runs:
	// FreshUntil <= now < StaleUntil.
	Stale
	// Expired entries are a miss, but usable if the upstream fails
	// (stale-if-error): StaleUntil <= now < ErrorUntil.
	Expired
	// Dead entries are useless: now is past every window.
	Dead
)

// String returns the lower-case name of f, as used in logs and headers.
func (f Freshness) String() string {
	switch f {
	case Fresh:
		return "fresh"
	case Stale:
		return "stale"
	case Expired:
		return "expired"
	case Dead:
		return "dead"
	}
	return "unknown"
}

// Entry is one cached upstream answer. Entries are immutable once stored:
// callers never mutate one they got from Get; they make a new one (see
// [Entry.Renewed] and [Entry.Clone]).
type Entry struct {
	Status     int
	Header     http.Header
	Body       []byte
	StoredAt   time.Time // when the answer was received from the upstream (or renewed by a 304)
	FreshUntil time.Time // served as is until then
	StaleUntil time.Time // served stale while one background refresh runs, until then
	ErrorUntil time.Time // served only when the upstream fails or the breaker is open, until then (stale-if-error)
}

// Windows are the lengths of an entry's three consecutive windows. Each one
// starts where the previous ends: fresh from the store time, stale after
// fresh, stale-if-error after stale. Negative lengths count as zero.
type Windows struct {
	Fresh        time.Duration
	Stale        time.Duration
	StaleIfError time.Duration
}

// NewEntry returns an entry received at now, with its deadlines laid out
// by w. It takes ownership of hdr and body. The engine and [Entry.Renewed]
// share this arithmetic so a fetched and a renewed entry agree.
func NewEntry(status int, hdr http.Header, body []byte, now time.Time, w Windows) *Entry {
	e := &Entry{Status: status, Header: hdr, Body: body}
	e.setWindows(now, w)
	return e
}

// setWindows stamps now and the deadlines; only for entries not yet shared.
func (e *Entry) setWindows(now time.Time, w Windows) {
	e.StoredAt = now
	e.FreshUntil = now.Add(max(w.Fresh, 0))
	e.StaleUntil = e.FreshUntil.Add(max(w.Stale, 0))
	e.ErrorUntil = e.StaleUntil.Add(max(w.StaleIfError, 0))
}

// Freshness reports where e stands at now. Each deadline is exclusive:
// at exactly FreshUntil an entry is already Stale.
func (e *Entry) Freshness(now time.Time) Freshness {
	switch {
	case now.Before(e.FreshUntil):
		return Fresh
	case now.Before(e.StaleUntil):
		return Stale
	case now.Before(e.ErrorUntil):
		return Expired
	default:
		return Dead
	}
}

// DeadAt is the instant e becomes Dead: the latest of its deadlines.
func (e *Entry) DeadAt() time.Time {
	t := e.FreshUntil
	if e.StaleUntil.After(t) {
		t = e.StaleUntil
	}
	if e.ErrorUntil.After(t) {
		t = e.ErrorUntil
	}
	return t
}

// Age is how long ago e was stored (the HTTP Age), never negative: a clock
// that steps back must not produce "Age: -3".
func (e *Entry) Age(now time.Time) time.Duration {
	return max(now.Sub(e.StoredAt), 0)
}

// Size is the heap e takes as the cache keeps it (a Record, record.go):
// the record and its buffer, each at the size its allocation takes
// (weight.go). With its key and otter's node it is the entry's weight in
// [Cache].
func (e *Entry) Size() int64 {
	return recordBytes + allocSize(recordLen(e))
}

// Renewed returns the copy of e that a 304 Not Modified produces: same
// status and body, stored at now, windows recomputed from now, and headers
// merged as RFC 9111 section 4.3.4 asks: each field present in hdr replaces
// the stored values of that name, except the fields a cache must not update
// from a 304 (see renewable); the stored Age goes, whether or not the 304
// has one. e itself is left untouched.
func (e *Entry) Renewed(now time.Time, fresh, stale, staleIfError time.Duration, hdr http.Header) *Entry {
	r := e.Clone()
	r.setWindows(now, Windows{Fresh: fresh, Stale: stale, StaleIfError: staleIfError})
	if r.Header == nil && len(hdr) > 0 {
		r.Header = http.Header{}
	}
	// The stored Age was the first answer's age when it came; the renewed
	// entry is as old as the 304 says (its own Age, merged below), or new.
	delete(r.Header, "Age")
	mergeHeader(r.Header, hdr)
	return r
}

// Clone returns a deep copy of e: its header and body share no memory with e.
func (e *Entry) Clone() *Entry {
	c := *e
	c.Header = e.Header.Clone()
	c.Body = bytes.Clone(e.Body)
	return &c
}

// renewable reports whether a 304 may overwrite the field (RFC 9111 3.2):
// not hop-by-hop fields (3.1), not Content-Length, and not the fields that
// describe the stored body's bytes, which a bodiless 304 cannot change.
func renewable(canonicalName string) bool {
	switch canonicalName {
	case "Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate",
		"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
		"Content-Length", "Content-Encoding", "Content-Range":
		return false
	}
	return true
}

// mergeHeader copies into dst every field of src that a 304 may update,
// replacing dst's values of that name. Fields that src's own Connection
// header names are hop-by-hop too and are skipped.
func mergeHeader(dst, src http.Header) {
	hop := connectionTokens(src)
	for name, values := range src {
		key := textproto.CanonicalMIMEHeaderKey(name)
		if !renewable(key) || hop[key] {
			continue
		}
		dst[key] = append([]string(nil), values...)
	}
}

// connectionTokens returns the canonical field names listed in h's
// Connection header.
func connectionTokens(h http.Header) map[string]bool {
	var m map[string]bool
	for _, v := range h.Values("Connection") {
		for tok := range strings.SplitSeq(v, ",") {
			if tok = strings.TrimSpace(tok); tok != "" {
				if m == nil {
					m = map[string]bool{}
				}
				m[textproto.CanonicalMIMEHeaderKey(tok)] = true
			}
		}
	}
	return m
}
