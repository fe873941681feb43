package demoupstream

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// FuzzDecodeFault: POST /-/faults bodies either decode to a valid Fault that
// round-trips through JSON, or fail with ErrBadFault; never a panic.
func FuzzDecodeFault(f *testing.F) {
	for _, seed := range []string{
		``, `{}`, `{"mode":"down"}`, `{"mode":"slow","delay":"2s"}`,
		`{"mode":"ratelimit","retry_after":3,"retry_after_date":true}`,
		`{"mode":"flaky","rate":0.3,"flaky_modes":["reset","slow"],"delay":"1ms","paths":["/api/"],"duration":"1m"}`,
		`{"mode":"down","delay":5}`, `{"mode":"x"}`, `[]`, `null`, `{"mode":"down"}{}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		flt, err := decodeFault(strings.NewReader(string(data)))
		if err != nil {
			if !errors.Is(err, ErrBadFault) {
				t.Fatalf("error %v does not wrap ErrBadFault", err)
			}
			return
		}
		out, err := json.Marshal(flt)
		if err != nil {
			t.Fatalf("marshal %+v: %v", flt, err)
		}
		if _, err := decodeFault(strings.NewReader(string(out))); err != nil {
			t.Fatalf("valid fault %s does not round-trip: %v", out, err)
		}
	})
}

// FuzzJobBody: any POST /api/jobs body gets 201 or a tagged 400, never a
// panic, and the echoed payload is valid JSON.
func FuzzJobBody(f *testing.F) {
	for _, seed := range []string{`{}`, `{"a":[1,2,{"b":null}]}`, `[1]`, `{`, ``, `"x"`, " {\"a\":1} ", `{"a":1} {}`} {
		f.Add(seed)
	}
	s, err := New(DefaultConfig())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body string) {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/api/jobs", strings.NewReader(body)))
		var env Envelope
		if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil {
			t.Fatalf("status %d body %q is not an envelope: %v", rec.Code, rec.Body, err)
		}
		switch rec.Code {
		case http.StatusCreated:
			var job Job
			if err := json.Unmarshal(env.Data, &job); err != nil || !json.Valid(job.Payload) {
				t.Fatalf("bad job %s: %v", env.Data, err)
			}
		case http.StatusBadRequest:
			if env.Error == nil || env.Error.Code != "bad_job" {
				t.Fatalf("400 without bad_job: %s", rec.Body)
			}
		default:
			t.Fatalf("status %d for body %q", rec.Code, body)
		}
	})
}

// FuzzConditional: arbitrary validator headers never panic, and an exact
// ETag always wins.
func FuzzConditional(f *testing.F) {
	f.Add(`"v1-00"`, "Sat, 01 Mar 2025 12:00:00 GMT")
	f.Add(`W/"a", *`, "garbage")
	f.Add(``, ``)
	f.Add(`,,,"`, "Mon, 02 Jan 2006 15:04:05 GMT")
	modified := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, inm, ims string) {
		r := httptest.NewRequest(http.MethodGet, "/api/stories/1", nil)
		r.Header.Set("If-None-Match", inm)
		r.Header.Set("If-Modified-Since", ims)
		_ = notModified(r, `"v1-00"`, modified)
		r.Header.Set("If-None-Match", inm+`,"v1-00"`)
		if !notModified(r, `"v1-00"`, modified) {
			t.Fatalf("exact ETag in %q not matched", inm)
		}
	})
}
