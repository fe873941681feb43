package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/levee/levee/demoupstream"
)

// upstreamAdmin drives the demo upstream's admin endpoints (neither
// counted nor faulted by it): the fault, and the call log the upstream's
// view is computed from.
type upstreamAdmin struct {
	base   string
	client *http.Client
}

func newUpstreamAdmin(base string) upstreamAdmin {
	return upstreamAdmin{base: base, client: &http.Client{Timeout: 10 * time.Second}}
}

// storm answers every /api/ call 429 with Retry-After: retryAfter seconds.
func (u upstreamAdmin) storm(retryAfter int) error {
	body, err := json.Marshal(demoupstream.Fault{Mode: demoupstream.ModeRateLimit, RetryAfter: retryAfter})
	if err != nil {
		return err
	}
	return u.do(http.MethodPost, "/-/faults", body, nil)
}

// heal ends any fault.
func (u upstreamAdmin) heal() error { return u.do(http.MethodDelete, "/-/faults", nil, nil) }

// reset zeroes the counters and the call log.
func (u upstreamAdmin) reset() error { return u.do(http.MethodPost, "/-/stats/reset", nil, nil) }

// calls returns every call since the last reset, oldest first. It fails
// when the upstream's log dropped some: the per-second counts would then
// be short (start it with a larger -log-size).
func (u upstreamAdmin) calls() ([]demoupstream.Call, error) {
	var st demoupstream.Stats
	if err := u.do(http.MethodGet, "/-/stats", nil, &st); err != nil {
		return nil, err
	}
	// A call is counted on arrival and logged when answered.
	if len(st.Log) < st.Total-st.InFlight {
		return nil, fmt.Errorf("the upstream logged %d of %d answered calls: raise its -log-size", len(st.Log), st.Total-st.InFlight)
	}
	return st.Log, nil
}

func (u upstreamAdmin) do(method, path string, body []byte, into any) error {
	req, err := http.NewRequest(method, u.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := u.client.Do(req)
	if err != nil {
		return fmt.Errorf("upstream %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("upstream %s %s: %s: %s", method, path, resp.Status, msg)
	}
	if into == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	return json.NewDecoder(resp.Body).Decode(into)
}
