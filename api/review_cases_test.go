package api

import (
	"net/http"
	"strings"
	"testing"
)

// Cases found in review of the RFC 9111 work (issue 26) and the record
// hit path (issue 25), each through one node over HTTP.

func TestEmptyTargetedFieldLeavesCacheControlInCharge(t *testing.T) {
	// RFC 9213 §2.1: "If a targeted field in a given response is empty
	// [...] that field MUST be ignored by the cache (i.e., it behaves as
	// if the field were not present". Taken as a valid field of no
	// directives, an empty one voided Cache-Control: private or no-store,
	// and the answer was stored and served to the next caller (here
	// stale-if-error, when the origin drops the connection).
	notServedToOthers := func(t *testing.T, resp *http.Response, body string) {
		if strings.Contains(body, "alice") {
			t.Fatalf("status %d, body %q: the first caller's answer was stored and served", resp.StatusCode, body)
		}
	}
	leak := func(cc, field, value string) conformanceCase {
		return conformanceCase{name: field + ": " + value + " beside Cache-Control: " + cc, steps: []step{
			{resp: []string{"Cache-Control", cc, field, value}, body: "alice's page", pause: true},
			{disconnect: true, want: notCached, check: notServedToOthers},
		}}
	}
	runConformance(t, []conformanceCase{
		leak("private, max-age=3600", "CDN-Cache-Control", ""),
		leak("private, max-age=3600", "Levee-Cache-Control", ""),
		leak("no-store", "CDN-Cache-Control", ""),
		leak("no-store", "Levee-Cache-Control", ""),
		{name: "an empty Levee-Cache-Control gives way to CDN-Cache-Control", steps: []step{
			{resp: []string{"CDN-Cache-Control", "max-age=3600", "Levee-Cache-Control", "", "Cache-Control", "no-store"}, pause: true},
			{want: cached},
		}},
	})
}

func TestInterimAnswersCarryNoInternalOrConnectionFields(t *testing.T) {
	// The final answer never carries X-Levee-* fields from the upstream
	// (nor the fields its Connection names): an upstream must not speak
	// Levee's own vocabulary to clients. Its 1xx answers passed them on.
	hints := []string{"103", "Link", "</a.css>; rel=preload", "X-Levee-Owner", "evil", "X-Levee-Node", "evil",
		"Connection", "X-Hop", "X-Hop", "1"}
	runConformance(t, []conformanceCase{
		{name: "a 103's internal and Connection-named fields are dropped", steps: []step{
			{interim: [][]string{hints}, resp: []string{"Cache-Control", "max-age=100000"}, want: notCached,
				wantInterim: []string{"103 Link: </a.css>; rel=preload"}},
		}},
	})
}

func TestIfNoneMatchStarHoldsAnyStoredAnswer(t *testing.T) {
	// RFC 9110 §13.1.2: "If-None-Match: *" is false when the target has a
	// current representation, ETag or not: a GET gets 304. An answer
	// without ETag got the whole 200.
	runConformance(t, []conformanceCase{
		{name: "If-None-Match: * on a stored answer without ETag: 304", steps: []step{
			freshAnswer(), {req: []string{"If-None-Match", "*"}, want: cached, wantStatus: http.StatusNotModified, wantBody: text("")}}},
		{name: "If-None-Match: * on a stored answer with an ETag: 304", steps: []step{
			freshAnswer("ETag", `"a"`), {req: []string{"If-None-Match", "*"}, want: cached, wantStatus: http.StatusNotModified}}},
		{name: "an empty If-None-Match element matches no answer without ETag", steps: []step{
			freshAnswer(), {req: []string{"If-None-Match", `"a", `}, want: cached, wantStatus: http.StatusOK}}},
	})
}
