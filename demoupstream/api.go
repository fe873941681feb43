package demoupstream

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// statusWriter remembers the status sent; 0 means nothing was written.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach Hijack for the "reset" fault.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// handleAPI counts the call, applies latency and the current fault, then
// routes to the resource handlers.
func (s *Server) handleAPI(w http.ResponseWriter, r *http.Request) {
	call := Call{
		Time: s.cfg.Now(), Method: r.Method, Key: KeyOf(r.URL), Tenant: r.Header.Get(HeaderTenant),
		Conditional: isConditional(r), RequestID: w.Header().Get(HeaderRequestID),
		Node: r.Header.Get(HeaderNodeHint), IdempotencyKey: loggedKey(r.Header.Get(HeaderIdempotencyKey)),
	}
	s.stats.begin(tenantKey{call.Tenant, call.Key})
	s.inflight.Add(1)
	defer s.inflight.Add(-1)
	sw := &statusWriter{ResponseWriter: w}
	// Deferred so a panic(http.ErrAbortHandler) from resetConn is recorded too.
	defer func() { s.stats.end(answered(call, sw, s.cfg.Now())) }()

	if err := s.sleep(r.Context(), s.cfg.Latency); err != nil {
		s.abortSleep(sw, r, err)
		return
	}
	mode, f := s.faults.pick(r.URL.Path, s.cfg.Now())
	if mode != ModeOK {
		call.Fault = mode
	}
	if s.inject(sw, r, mode, f) {
		return
	}
	s.api.ServeHTTP(sw, withCall(r, &call))
}

// answered completes call with what sw sent: the status and, when an
// answer was written, when and with which Retry-After. net/http flushes a
// handler's buffered answer as the handler returns, so now is when the
// last of it left.
func answered(call Call, sw *statusWriter, now time.Time) Call {
	call.Status = sw.status
	if sw.status != 0 {
		call.Answered, call.RetryAfter = now, sw.Header().Get("Retry-After")
	}
	return call
}

// inject carries out a fault mode; it reports whether it answered.
func (s *Server) inject(w http.ResponseWriter, r *http.Request, mode string, f Fault) bool {
	switch mode {
	case ModeDown:
		s.writeAPIError(w, r, errInjectedDown)
	case ModeError:
		s.writeAPIError(w, r, errInjectedError)
	case ModeRateLimit:
		w.Header().Set("Retry-After", s.retryAfter(f))
		s.writeAPIError(w, r, errRateLimited)
	case ModeReset:
		resetConn(w)
	case ModeSlow:
		if err := s.sleep(r.Context(), time.Duration(f.Delay)); err != nil {
			s.abortSleep(w, r, err)
			return true
		}
		return false
	default:
		return s.injectBudgetMode(r.Context(), w, r, mode, f)
	}
	return true
}

// retryAfter formats Retry-After in seconds or, rounded up so a client never
// retries early, as an HTTP-date.
func (s *Server) retryAfter(f Fault) string {
	if !f.RetryAfterDate {
		return strconv.Itoa(f.RetryAfter)
	}
	at := s.cfg.Now().Add(time.Duration(f.RetryAfter) * time.Second)
	if t := at.Truncate(time.Second); !t.Equal(at) {
		at = t.Add(time.Second)
	}
	return at.UTC().Format(http.TimeFormat)
}

// abortSleep answers a sleep cut short: 503 on Close, nothing at all when
// the client is gone (there is nobody to answer).
func (s *Server) abortSleep(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, ErrClosed) {
		s.writeAPIError(w, r, err)
	}
}

// resetConn drops the connection without a response. SetLinger(0) makes the
// close send RST, so the client sees "connection reset" rather than a
// clean EOF. Without Hijack (HTTP/2, recorders) http.ErrAbortHandler is the
// standard way to make net/http abort the response.
func resetConn(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// envelope starts a tagged body for r.
func (s *Server) envelope(r *http.Request, version int64) Envelope {
	return Envelope{
		Tenant:    r.Header.Get(HeaderTenant),
		Key:       KeyOf(r.URL),
		Version:   version,
		FetchedAt: s.cfg.Now().UTC(),
		NodeHint:  r.Header.Get(HeaderNodeHint),
	}
}

// writeAPIError writes a tagged error body that no cache should keep.
func (s *Server) writeAPIError(w http.ResponseWriter, r *http.Request, err error) {
	status, code := errorStatus(err)
	env := s.envelope(r, 0)
	env.Error = &APIError{Code: code, Message: err.Error()}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, status, env)
}

func (s *Server) handleNotFound(w http.ResponseWriter, r *http.Request) {
	s.writeAPIError(w, r, ErrNotFound)
}

func (s *Server) handleStory(w http.ResponseWriter, r *http.Request) {
	s.serveResource(w, r, r.PathValue("id"), func(tenant, id string, gen int64) any {
		return buildStory(tenant, id, gen)
	})
}

func (s *Server) handleComments(w http.ResponseWriter, r *http.Request) {
	s.serveResource(w, r, r.PathValue("id"), func(tenant, id string, gen int64) any {
		return buildComments(tenant, id, gen)
	})
}

// handleAddComment is the demo's write: it bumps the story's comments to a
// new version at once (what a cache in front must not keep serving the old
// one of) and answers 201 with it. The body is read and discarded.
func (s *Server) handleAddComment(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !validID(id) {
		s.writeAPIError(w, r, ErrNotFound)
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, maxJobBody))
	u := *r.URL
	u.RawQuery = ""
	tk := tenantKey{r.Header.Get(HeaderTenant), KeyOf(&u)}
	gen := s.content.write(tk, s.cfg.Now())
	data, err := json.Marshal(buildComments(tk.tenant, id, gen))
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	env := s.envelope(r, gen)
	env.Data = data
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, env)
}

func (s *Server) handleUser(w http.ResponseWriter, r *http.Request) {
	s.serveResource(w, r, r.PathValue("name"), func(tenant, name string, gen int64) any {
		return buildUser(tenant, name, gen)
	})
}

// serveResource answers a GET with validators, a 304 when the client's copy
// is current, else the tagged body.
func (s *Server) serveResource(w http.ResponseWriter, r *http.Request, id string, build func(tenant, id string, gen int64) any) {
	if !validID(id) {
		s.writeAPIError(w, r, ErrNotFound)
		return
	}
	tk := tenantKey{r.Header.Get(HeaderTenant), KeyOf(r.URL)}
	gen, modified := s.content.generation(tk, s.cfg.Now())
	etag := etagFor(tk, gen)
	s.setCacheHeaders(w, r, etag, modified)
	if notModified(r, etag, modified) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	data, err := json.Marshal(build(tk.tenant, id, gen))
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	env := s.envelope(r, gen)
	env.Data = data
	writeJSON(w, http.StatusOK, env)
}

func (s *Server) setCacheHeaders(w http.ResponseWriter, r *http.Request, etag string, modified time.Time) {
	h := w.Header()
	h.Set("ETag", etag)
	h.Set("Last-Modified", modified.UTC().Format(http.TimeFormat))
	if s.cfg.MaxAge > 0 {
		h.Set("Cache-Control", "public, max-age="+strconv.Itoa(int(s.cfg.MaxAge/time.Second)))
	}
	// The answer differs per tenant, so a shared cache must key on it.
	if r.Header.Get(HeaderTenant) != "" {
		h.Set("Vary", HeaderTenant)
	}
}
