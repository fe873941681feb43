package upstream

import (
	"errors"
	"github.com/levee/levee/internal/testutil"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// errNet stands for a dropped connection.
var errNet = errors.New("connection reset by peer")

// step scripts one attempt's outcome.
type step struct {
	status     int
	header     http.Header
	body       string
	err        error
	delay      time.Duration // held before answering; ends early with the ctx
	retryAtIn  time.Duration // if set, Retry-After is an HTTP-date this far ahead
	unsizedLen bool          // ContentLength -1, as a chunked body
	bodyErr    error         // the body fails with it after its bytes
}

// script is an in-memory RoundTripper answering steps in order; the last
// step repeats. It records every attempt's time, host and body, and the
// peak of concurrent attempts.
type script struct {
	mu       sync.Mutex
	steps    []step
	times    []time.Time
	bodies   []string
	inflight int
	peak     int
}

func (s *script) RoundTrip(r *http.Request) (*http.Response, error) {
	st := s.begin(r)
	defer s.end()
	if st.delay > 0 {
		t := time.NewTimer(st.delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
	if st.err != nil {
		return nil, st.err
	}
	h := st.header.Clone()
	if h == nil {
		h = http.Header{}
	}
	if st.retryAtIn > 0 {
		h.Set("Retry-After", time.Now().Add(st.retryAtIn).UTC().Format(http.TimeFormat))
	}
	n := int64(len(st.body))
	if st.unsizedLen {
		n = -1
	}
	var body io.Reader = strings.NewReader(st.body)
	if st.bodyErr != nil {
		body = io.MultiReader(body, iotest.ErrReader(st.bodyErr))
	}
	return &http.Response{StatusCode: st.status, Header: h, ContentLength: n,
		Body: io.NopCloser(body), Request: r}, nil
}

func (s *script) begin(r *http.Request) step {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.times = append(s.times, time.Now())
	s.bodies = append(s.bodies, string(body))
	s.inflight++
	s.peak = max(s.peak, s.inflight)
	return s.steps[min(len(s.times), len(s.steps))-1]
}

func (s *script) end() {
	s.mu.Lock()
	s.inflight--
	s.mu.Unlock()
}

func (s *script) attempts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.times)
}

// waits returns the gaps between consecutive attempts.
func (s *script) waits() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var w []time.Duration
	for i := 1; i < len(s.times); i++ {
		w = append(w, s.times[i].Sub(s.times[i-1]))
	}
	return w
}

func newClient(t testing.TB, cfg Config) *Client {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

func testLogger(t testing.TB) *slog.Logger { return testutil.Logger(t, slog.LevelInfo) }

func getReq(t testing.TB, rawURL string) *Request {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return &Request{Route: "comments", Method: http.MethodGet, URL: u, Header: http.Header{}}
}

func status(code int, kv ...string) step {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return step{status: code, header: h, body: strconv.Itoa(code)}
}

func ms(v ...int) []time.Duration {
	d := make([]time.Duration, len(v))
	for i, x := range v {
		d[i] = time.Duration(x) * time.Millisecond
	}
	return d
}

func fixedRand(r float64) func() float64 { return func() float64 { return r } }

// recObserver records the hooks' calls.
type recObserver struct {
	mu       sync.Mutex
	statuses []int
	reasons  []string
	inflight map[string]int
	peak     int
	refused  []string
}

func (o *recObserver) Attempt(_, _ string, status int, _ error, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.statuses = append(o.statuses, status)
}

func (o *recObserver) RetryWait(_, _, reason string, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.reasons = append(o.reasons, reason)
}

func (o *recObserver) InFlight(host string, delta int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.inflight == nil {
		o.inflight = map[string]int{}
	}
	o.inflight[host] += delta
	o.peak = max(o.peak, o.inflight[host])
}

func (o *recObserver) Refused(_, _, reason string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.refused = append(o.refused, reason)
}

func slogJSON(w io.Writer) *slog.Logger { return slog.New(slog.NewJSONHandler(w, nil)) }
