package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
)

func TestHitServesTheUpstreamsAnswerAsAHit(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=600")
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("ETag", `"v1"`)
		w.Header().Set("X-Internal", "not kept")
		_, _ = io.WriteString(w, `{"a":1}`)
	}))
	defer up.Close()
	tests := []struct {
		name     string
		from     string
		size     int
		wantBody int
		wantETag string
	}{
		{name: "from an upstream", from: up.URL, wantBody: len(`{"a":1}`), wantETag: `"v1"`},
		{name: "generated", size: 1024, wantBody: 1024},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := newHit(tt.from, tt.size)
			if err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/anything", nil))
			if rec.Body.Len() != tt.wantBody {
				t.Errorf("body %d bytes, want %d", rec.Body.Len(), tt.wantBody)
			}
			hdr := rec.Header()
			if got := hdr.Get("Content-Length"); got != strconv.Itoa(tt.wantBody) {
				t.Errorf("Content-Length = %q", got)
			}
			if hdr.Get("X-Cache") != "HIT" || hdr.Get("Age") != "0" || hdr.Get("Cache-Control") == "" {
				t.Errorf("not a hit's headers: %v", hdr)
			}
			if got := hdr.Get("ETag"); got != tt.wantETag {
				t.Errorf("ETag = %q, want %q", got, tt.wantETag)
			}
			if hdr.Get("X-Internal") != "" {
				t.Errorf("kept a header a hit does not carry: %v", hdr)
			}
		})
	}
}
