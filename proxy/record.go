package proxy

import (
	"net/http"
	"strings"
	"time"

	"github.com/levee/levee/store"
)

// A fresh hit under a primary key is served from the cache's record as it
// is (store.Record): its header is not decoded into a map, which would
// cost a map and its inserts per hit, but copied by api straight from the
// record into the client's answer, through the same rule as
// CopyCleanHeader. Response.Record carries it; Request.ReadsRecord says the
// caller reads the header there.

// CopyCleanRecord is CopyCleanHeader with a record's stored header as the
// source: it sets in dst every stored field CleanHeader keeps, and, with
// dropLength, all but Content-Length (a caller that states the length of
// the body it writes spares the copy and its removal). The values are the
// record's own read-only strings, in one array allocated here with spare
// more, returned for the caller's own fields (store.Record's CopyHeader).
func CopyCleanRecord(dst http.Header, rec *store.Record, internal bool, spare int, dropLength bool) []string {
	var named []string
	if _, n := rec.Field("Connection"); n > 0 {
		for k, v := range rec.Values() {
			if k == "Connection" {
				named = appendConnectionNamed(named, v)
			}
		}
	}
	return rec.CopyHeader(dst, func(k string) bool {
		return dropLength && k == "Content-Length" || dropped(k, named, internal)
	}, spare)
}

// RecordInitialAge is InitialAge of a record's stored header.
func RecordInitialAge(rec *store.Record) time.Duration {
	v, n := rec.Field("Age")
	if n == 0 {
		return 0
	}
	first, _, _ := strings.Cut(v, ",")
	return DeltaSeconds(strings.TrimSpace(first))
}

// RecordDecodable is Decodable for a record's stored header: true at
// once when it has no Content-Encoding (the usual case).
func RecordDecodable(rec *store.Record, ae []string) bool {
	if _, n := rec.Field("Content-Encoding"); n == 0 {
		return true
	}
	var codings []string
	for k, v := range rec.Values() {
		if k == "Content-Encoding" {
			codings = append(codings, v)
		}
	}
	return Decodable(http.Header{"Content-Encoding": codings}, ae)
}

// ResponseValue is the first value of the canonical field name in resp's
// header, read from its record when the engine left Header nil.
func ResponseValue(resp *Response, name string) string {
	if resp.Header == nil && resp.Record != nil {
		return resp.Record.Value(name)
	}
	if v := resp.Header[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// hitRecord is the answer of rec, fresh at now and stored under key. Its
// Header is left nil when the caller reads the record (lean).
func (e *Engine) hitRecord(key string, rec *store.Record, now time.Time, lean bool) *Response {
	resp := &Response{Status: rec.Status(), Body: rec.Body(), Result: Hit, Age: rec.Age(now),
		FreshFor: max(0, rec.FreshUntil().Sub(now)), Key: key, StoredAt: rec.StoredAt(), Record: rec}
	if !lean {
		resp.Header = rec.Header()
	}
	return resp
}

// freshVariant is follow for a fresh hit, on records: the variant key
// marker (a Vary marker's record) leads to for prepared request r, and
// the variant's record when it is an answer the marker leads to
// (markerSince), fresh at now, and in a coding r's client can read
// (Decodable). Anything else is left to follow.
func (e *Engine) freshVariant(pkey string, marker *store.Record, r *Request, now time.Time) (string, *store.Record, bool) {
	var names []string
	for k, v := range marker.Values() {
		if k == "Vary" {
			names = append(names, v)
		}
	}
	key := VaryKey(pkey, names, r.Header)
	v, ok := e.cfg.Cache.Record(key)
	if !ok || v.Status() == 0 || v.Freshness(now) != store.Fresh || v.StoredAt().Before(recordSince(marker)) ||
		!RecordDecodable(v, r.acceptEncoding) {
		return key, nil, false
	}
	return key, v, true
}

// recordSince is markerSince of a marker's record.
func recordSince(m *store.Record) time.Time {
	v, n := m.Field(sinceField)
	if n != 1 {
		return time.Time{}
	}
	return parseSince(v)
}
