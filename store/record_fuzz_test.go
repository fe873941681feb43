package store

import (
	"bytes"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// FuzzRecordRoundTrip: any header and body a record is built from
// (names and values of any bytes and length, as a peer or the cache file
// may hand them over) read back unchanged, through Header, CopyHeader,
// Field and Body. The block is only ever built by encodeHeader, so this
// checks the encoding against the decoders on whatever it is given.
func FuzzRecordRoundTrip(f *testing.F) {
	f.Add("Etag\x00\"v1\"\x01Vary\x00Accept\x00X-Tenant\x01Connection\x00close", []byte("body"), 200)
	f.Add("", []byte{}, 0)
	f.Add("A\x01B\x00\x01\x00\x00", []byte(nil), 204)
	f.Add(strings.Repeat("X-Long\x00"+strings.Repeat("v", 300)+"\x01", 3), bytes.Repeat([]byte("b"), 5000), 500)
	f.Fuzz(func(t *testing.T, fields string, body []byte, status int) {
		if status < 0 || status > maxRecordStatus {
			return // not storable (Cache.storable)
		}
		h := http.Header{}
		for f := range strings.SplitSeq(fields, "\x01") {
			name, values, _ := strings.Cut(f, "\x00")
			if values == "" {
				h[name] = nil
				continue
			}
			h[name] = append(h[name], strings.Split(values, "\x00")...)
		}
		e := &Entry{Status: status, Header: h, Body: body, StoredAt: t0}
		r := newRecord(e)
		want := http.Header{}
		for k, vs := range h {
			if len(vs) == 0 {
				vs = nil
			}
			want[k] = vs
		}
		if got := r.Header(); !reflect.DeepEqual(got, want) {
			t.Fatalf("Header() = %q, want %q", got, want)
		}
		copied := http.Header{}
		r.CopyHeader(copied, nil, 1)
		for k, vs := range h {
			if len(vs) > 0 && !reflect.DeepEqual(copied[k], vs) {
				t.Fatalf("CopyHeader[%q] = %q, want %q", k, copied[k], vs)
			}
			if first, n := r.Field(k); n != len(vs) || n > 0 && first != vs[0] {
				t.Fatalf("Field(%q) = %q, %d; want %d values", k, first, n, len(vs))
			}
		}
		if !bytes.Equal(r.Body(), body) || r.Status() != status || len(r.buf) != recordLen(e) {
			t.Fatalf("body %q status %d len %d; want %q %d %d", r.Body(), r.Status(), len(r.buf), body, status, recordLen(e))
		}
	})
}
