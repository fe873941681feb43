package proxy

import (
	"net/http"
	"testing"
	"time"
)

// Answer: a client's conditionals (RFC 9110 §13) and Range (§14) against
// the 200 answer Levee serves.
func TestAnswerEvaluatesConditionalsAndRanges(t *testing.T) {
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	lm := httpDate(now.Add(-time.Hour))
	stored := []string{"Etag", `"abc"`, "Last-Modified", lm, "Date", httpDate(now), "Content-Type", "text/plain"}
	body := "0123456789A"
	cases := []struct {
		name       string
		method     string
		status     int
		answer     []string
		req        []string
		wantStatus int
		wantBody   string
		wantRange  string
	}{
		{"§13.1.2 If-None-Match strong", "GET", 200, stored, []string{"If-None-Match", `"abc"`}, 304, "", ""},
		{"§13.1.2 If-None-Match weak comparison", "GET", 200, stored, []string{"If-None-Match", `W/"abc"`}, 304, "", ""},
		{"§13.1.2 If-None-Match in a list", "GET", 200, stored, []string{"If-None-Match", `"x", "abc", "y"`}, 304, "", ""},
		{"§13.1.2 If-None-Match on HEAD", "HEAD", 200, stored, []string{"If-None-Match", `"abc"`}, 304, "", ""},
		{"§13.1.2 If-None-Match no match", "GET", 200, stored, []string{"If-None-Match", `"x"`}, 200, body, ""},
		{"§13.1.2 If-None-Match outranks If-Modified-Since", "GET", 200, stored, []string{"If-None-Match", `"x"`, "If-Modified-Since", httpDate(now)}, 200, body, ""},
		{"§13.1.3 If-Modified-Since equal", "GET", 200, stored, []string{"If-Modified-Since", lm}, 304, "", ""},
		{"§13.1.3 If-Modified-Since later", "GET", 200, stored, []string{"If-Modified-Since", httpDate(now)}, 304, "", ""},
		{"§13.1.3 If-Modified-Since earlier", "GET", 200, stored, []string{"If-Modified-Since", httpDate(now.Add(-2 * time.Hour))}, 200, body, ""},
		{"§13.1.3 If-Modified-Since in RFC 850 form", "GET", 200, stored, []string{"If-Modified-Since", now.Format("Monday, 02-Jan-06 15:04:05 GMT")}, 304, "", ""},
		{"§13.1.3 If-Modified-Since in asctime form", "GET", 200, stored, []string{"If-Modified-Since", now.Format(time.ANSIC)}, 304, "", ""},
		{"§13.1.3 an invalid date is ignored", "GET", 200, stored, []string{"If-Modified-Since", "yesterday"}, 200, body, ""},
		{"RFC 9111 §4.3.2 no Last-Modified: Date", "GET", 200, []string{"Date", httpDate(now.Add(-time.Minute))}, []string{"If-Modified-Since", httpDate(now.Add(-time.Minute))}, 304, "", ""},
		{"§13.2.1 only 200 answers", "GET", 404, stored, []string{"If-None-Match", `"abc"`}, 404, body, ""},
		{"§13.2.1 never a POST", "POST", 200, stored, []string{"If-None-Match", `"abc"`}, 200, body, ""},
		{"§14.1.2 first-last", "GET", 200, stored, []string{"Range", "bytes=0-1"}, 206, "01", "bytes 0-1/11"},
		{"§14.1.2 open-ended", "GET", 200, stored, []string{"Range", "bytes=1-"}, 206, "123456789A", "bytes 1-10/11"},
		{"§14.1.2 suffix", "GET", 200, stored, []string{"Range", "bytes=-1"}, 206, "A", "bytes 10-10/11"},
		{"§14.1.2 suffix longer than the body", "GET", 200, stored, []string{"Range", "bytes=-100"}, 206, body, "bytes 0-10/11"},
		{"§14.1.2 last past the end", "GET", 200, stored, []string{"Range", "bytes=5-100"}, 206, "56789A", "bytes 5-10/11"},
		{"§15.5.17 unsatisfiable", "GET", 200, stored, []string{"Range", "bytes=11-"}, 416, "", "bytes */11"},
		{"§14.2 several ranges: ignored", "GET", 200, stored, []string{"Range", "bytes=0-1,3-4"}, 200, body, ""},
		{"§14.2 another unit: ignored", "GET", 200, stored, []string{"Range", "items=0-1"}, 200, body, ""},
		{"§14.2 bad syntax: ignored", "GET", 200, stored, []string{"Range", "bytes=2-1"}, 200, body, ""},
		{"§14.2 HEAD: ignored", "HEAD", 200, stored, []string{"Range", "bytes=0-1"}, 200, body, ""},
		{"§13.1.5 If-Range matching entity-tag", "GET", 200, stored, []string{"Range", "bytes=0-1", "If-Range", `"abc"`}, 206, "01", "bytes 0-1/11"},
		{"§13.1.5 If-Range other entity-tag: whole", "GET", 200, stored, []string{"Range", "bytes=0-1", "If-Range", `"x"`}, 200, body, ""},
		{"§13.1.5 If-Range weak: whole", "GET", 200, stored, []string{"Range", "bytes=0-1", "If-Range", `W/"abc"`}, 200, body, ""},
		{"§13.1.5 If-Range equal date", "GET", 200, stored, []string{"Range", "bytes=0-1", "If-Range", lm}, 206, "01", "bytes 0-1/11"},
		{"§13.2.2 conditionals before Range", "GET", 200, stored, []string{"Range", "bytes=0-1", "If-None-Match", `"abc"`}, 304, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, req := http.Header{}, http.Header{}
			for i := 0; i+1 < len(tc.answer); i += 2 {
				h.Add(tc.answer[i], tc.answer[i+1])
			}
			for i := 0; i+1 < len(tc.req); i += 2 {
				req.Add(tc.req[i], tc.req[i+1])
			}
			status, got := Answer(h, tc.method, req, tc.status, []byte(body), now)
			if status != tc.wantStatus || string(got) != tc.wantBody || h.Get("Content-Range") != tc.wantRange {
				t.Fatalf("Answer = %d %q Content-Range %q, want %d %q %q", status, got, h.Get("Content-Range"), tc.wantStatus, tc.wantBody, tc.wantRange)
			}
			if status == 304 && (h.Get("Content-Type") != "" || h.Get("Etag") == "" && tc.answer[0] == "Etag") {
				t.Fatalf("304 header %v: want no Content-Type, the ETag kept", h)
			}
		})
	}
}

// FuzzByteRange: no Range value crashes it, and a satisfiable range lies
// inside the body.
func FuzzByteRange(f *testing.F) {
	for _, s := range []string{"bytes=0-1", "bytes=-5", "bytes=3-", "bytes=9999999999999999999-", "bytes=-", "bytes=1-0"} {
		f.Add(s, int64(10))
	}
	f.Fuzz(func(t *testing.T, v string, size int64) {
		if size < 0 || size > 1<<20 {
			return
		}
		start, end, ok, sat := byteRange(v, size)
		if ok && sat && (start < 0 || end >= size || start > end) {
			t.Fatalf("byteRange(%q, %d) = %d-%d", v, size, start, end)
		}
	})
}
