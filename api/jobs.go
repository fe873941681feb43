package api

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/levee/levee/proxy"
	"github.com/levee/levee/queue"
)

// The durable job queue over HTTP (issue 13): a write the client asked to
// run later (Prefer: respond-async, RFC 7240) or on a route configured
// queue: always is committed as a job and answered 202 Accepted with the
// job's Location; /-/jobs reads and manages jobs.

// Jobs is the job queue as the API sees it (queue.Service). Default nil:
// no queue; Prefer: respond-async is then not honoured (the request is
// served at once, as RFC 7240 allows) and /-/jobs answers 404.
type Jobs interface {
	Enqueue(ctx context.Context, req queue.Request) (queue.Result, error)
	Replay(ctx context.Context, id string) (queue.Result, error)
	Delete(ctx context.Context, id string) (queue.Result, error)
	Job(id string) (queue.Job, bool)
	List(state queue.State, after string, limit int) ([]queue.Job, string)
}

// ErrQueueFull: the queue holds queue.max_jobs jobs or queue.max_bytes
// bytes; retrying later may succeed.
var ErrQueueFull = errors.New("api: job queue full")

// maxKeyLen bounds a client's Idempotency-Key on a queued request.
const maxKeyLen = 256

// List paging bounds for GET /-/jobs.
const (
	defaultJobPage = 100
	maxJobPage     = 1000
)

// queued reports whether req becomes a job rather than a call: a write, on
// a node with a queue, on a route that queues always or with the client's
// Prefer: respond-async.
func (s *Server) queued(r *http.Request, req *proxy.Request) (async bool, ok bool) {
	if s.cfg.Jobs == nil || !queue.QueueableMethod(req.Method) {
		return false, false
	}
	rt, _ := s.routeByName(req.Route)
	async = prefersAsync(r.Header)
	return async, async || rt.QueueAlways
}

// prefersAsync reports whether the Prefer header fields hold the
// respond-async preference (RFC 7240 §4.1; tokens are case-insensitive,
// and a preference may carry parameters, which respond-async has none of).
func prefersAsync(h http.Header) bool {
	for _, v := range h.Values("Prefer") {
		for pref := range strings.SplitSeq(v, ",") {
			name, _, _ := strings.Cut(pref, ";")
			name, _, _ = strings.Cut(name, "=")
			if strings.EqualFold(strings.TrimSpace(name), "respond-async") {
				return true
			}
		}
	}
	return false
}

// enqueue commits req as a job and answers 202 with its Location. An
// enqueue whose commit is unknown (queue.ErrOutcomeUnknown) is a 504 that
// still names the job's Location: the job may exist, now or soon, and a
// 503 would tell the client to send the write again.
func (s *Server) enqueue(w http.ResponseWriter, r *http.Request, req *proxy.Request, async bool, start time.Time) {
	qr, err := s.jobRequest(req)
	if err != nil {
		s.fail(w, r, req.Route, err, start)
		return
	}
	res, err := s.cfg.Jobs.Enqueue(r.Context(), qr)
	switch {
	case errors.Is(err, queue.ErrTooLarge): // could never fit: never proposed, and a retry would not help
		s.fail(w, r, req.Route, fmt.Errorf("%w: %w", ErrBodyTooLarge, err), start)
		return
	case errors.Is(err, queue.ErrBadCommand): // past a job's bounds: never proposed
		s.fail(w, r, req.Route, fmt.Errorf("%w: %w", proxy.ErrBadRequest, err), start)
		return
	case errors.Is(err, queue.ErrOutcomeUnknown): // may be committed: never "nothing was promised"
		w.Header().Set("Location", "/-/jobs/"+res.ID)
		s.fail(w, r, req.Route, err, start)
		return
	case errors.Is(err, queue.ErrUnavailable): // provably not committed
		s.fail(w, r, req.Route, fmt.Errorf("%w: %w", ErrUnavailable, err), start)
		return
	case err != nil: // committed, but its answer unreadable
		s.fail(w, r, req.Route, err, start)
		return
	case res.Refused == queue.RefusedFull:
		s.fail(w, r, req.Route, ErrQueueFull, start)
		return
	case res.Refused != "":
		s.fail(w, r, req.Route, res.Err(), start)
		return
	}
	h := w.Header()
	h.Set("Location", "/-/jobs/"+res.ID)
	if async {
		h.Set("Preference-Applied", "respond-async")
	}
	h.Set("X-Levee-Node", s.cfg.Node)
	writeJSON(w, http.StatusAccepted, map[string]any{"id": res.ID, "state": res.State})
	s.observe(req.Route, http.StatusAccepted, "QUEUED", start)
}

// jobRequest is the job for req: checked as the proxy would check the call
// (tenant, path, body), with the client's Idempotency-Key taken out of the
// headers (every attempt carries the job's key) and Prefer too (it was
// addressed to Levee). Its tenant is the engine's, in either mode: a
// job's tenant scopes its Idempotency-Key and who reads it, so a tenant
// taken from an API key must not become "" here.
func (s *Server) jobRequest(req *proxy.Request) (queue.Request, error) {
	req.Clean() // the job keeps the end-to-end header, Forwarded included
	if _, err := s.cfg.Engine.RoutingKey(req); err != nil {
		return queue.Request{}, err
	}
	tenant, err := s.cfg.Engine.Tenant(req.Route, req.Header)
	if err != nil {
		return queue.Request{}, err
	}
	rt, _ := s.routeByName(req.Route)
	h := req.Header.Clone()
	key := h.Get("Idempotency-Key")
	if len(key) > maxKeyLen || len(h.Values("Idempotency-Key")) > 1 {
		return queue.Request{}, fmt.Errorf("%w: one Idempotency-Key of at most %d bytes", proxy.ErrBadRequest, maxKeyLen)
	}
	h.Del("Idempotency-Key")
	h.Del("Prefer")
	qr := queue.Request{Route: req.Route, Method: req.Method, Path: req.Path, RawQuery: req.RawQuery,
		Header: h, Body: req.Body, Key: key, ClientKey: key != "", Host: rt.Host, Tenant: tenant}
	return qr, nil
}

// JobView is one job in /-/jobs (its JSON names are part of the HTTP
// contract).
type JobView struct {
	ID            string           `json:"id"`
	Route         string           `json:"route"`
	Method        string           `json:"method"`
	State         queue.State      `json:"state"`
	Attempts      int              `json:"attempts"`
	CreatedAt     time.Time        `json:"created_at"`
	NextAttemptAt *time.Time       `json:"next_attempt_at,omitempty"`
	FinishedAt    *time.Time       `json:"finished_at,omitempty"`
	LastError     string           `json:"last_error,omitempty"`
	Response      *JobResponseView `json:"response,omitempty"`
}

// JobResponseView is the upstream's answer to a job's last attempt. Body
// is the body as text when it is UTF-8, else BodyBase64 holds it.
type JobResponseView struct {
	Status     int         `json:"status"`
	Headers    http.Header `json:"headers"`
	Body       string      `json:"body,omitempty"`
	BodyBase64 string      `json:"body_base64,omitempty"`
	Truncated  bool        `json:"truncated,omitempty"`
}

func jobView(j queue.Job) JobView {
	v := JobView{ID: j.ID, Route: j.Req.Route, Method: j.Req.Method, State: j.State, Attempts: j.Attempts,
		CreatedAt: time.Unix(0, j.CreatedAt).UTC(), LastError: j.LastError}
	switch j.State {
	case queue.Queued, queue.Delayed:
		t := time.Unix(0, j.NextAt).UTC()
		v.NextAttemptAt = &t
	case queue.Done, queue.Dead:
		t := time.Unix(0, j.FinishedAt).UTC()
		v.FinishedAt = &t
	}
	if resp := j.Response; resp != nil {
		rv := &JobResponseView{Status: resp.Status, Headers: resp.Header, Truncated: resp.Truncated}
		if utf8.Valid(resp.Body) {
			rv.Body = string(resp.Body)
		} else {
			rv.BodyBase64 = base64.StdEncoding.EncodeToString(resp.Body)
		}
		v.Response = rv
	}
	return v
}

// job answers GET /-/jobs/{id}: the job's id is a capability (128 random
// bits), and a tenant's job is read only by a request of that tenant (or
// with the admin token); anyone else gets the 404 an unknown id gets.
func (s *Server) job(w http.ResponseWriter, r *http.Request) {
	j, ok := s.visibleJob(r, r.PathValue("id"))
	if !ok {
		s.writeError(w, r, fmt.Errorf("%w: no such job", ErrNotFound))
		return
	}
	writeJSON(w, http.StatusOK, jobView(j))
}

func (s *Server) visibleJob(r *http.Request, id string) (queue.Job, bool) {
	if s.cfg.Jobs == nil {
		return queue.Job{}, false
	}
	j, ok := s.cfg.Jobs.Job(id)
	if !ok {
		return queue.Job{}, false
	}
	if s.checkAdmin(r) == nil {
		return j, true
	}
	// The reader's tenant by the route's rule, as the job's was: in
	// credential mode the tenant of the key r carries, never one r merely
	// names. A request the route would refuse (two keys), or one on a
	// route a reload removed, belongs to no tenant and reads no job: those
	// are the admin's. The header is cleaned as the job's was (jobRequest):
	// read as it came, a route keyed on X-Forwarded-For would take the
	// reader's word for the tenant, and a field its Connection names would
	// count.
	h := proxy.ClientHeader(r.Header, r.RemoteAddr, r.TLS != nil)
	tenant, err := s.cfg.Engine.Tenant(j.Req.Route, h)
	return j, err == nil && tenant == j.Req.Tenant
}

// jobs answers GET /-/jobs?state=S&after=ID&limit=N (admin token): a page
// of jobs, oldest first, and the cursor of the next.
func (s *Server) jobs(w http.ResponseWriter, r *http.Request) {
	if err := s.jobsAdmin(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	q := r.URL.Query()
	state := queue.State(q.Get("state"))
	if state != "" && !state.Valid() {
		s.writeError(w, r, fmt.Errorf("%w: state must be one of queued, delayed, running, done, dead", proxy.ErrBadRequest))
		return
	}
	limit := defaultJobPage
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > maxJobPage {
			s.writeError(w, r, fmt.Errorf("%w: limit must be 1..%d", proxy.ErrBadRequest, maxJobPage))
			return
		}
		limit = n
	}
	list, next := s.cfg.Jobs.List(state, q.Get("after"), limit)
	out := struct {
		Jobs []JobView `json:"jobs"`
		Next string    `json:"next,omitempty"`
	}{Jobs: make([]JobView, 0, len(list)), Next: next}
	for _, j := range list {
		out.Jobs = append(out.Jobs, jobView(j))
	}
	writeJSON(w, http.StatusOK, out)
}

// replayJob answers POST /-/jobs/{id}/replay (admin token): a dead job is
// queued again with its attempts reset.
func (s *Server) replayJob(w http.ResponseWriter, r *http.Request) {
	s.jobCommand(w, r, s.cfg.Jobs.Replay)
}

// deleteJob answers DELETE /-/jobs/{id} (admin token).
func (s *Server) deleteJob(w http.ResponseWriter, r *http.Request) {
	s.jobCommand(w, r, s.cfg.Jobs.Delete)
}

func (s *Server) jobCommand(w http.ResponseWriter, r *http.Request, do func(context.Context, string) (queue.Result, error)) {
	if err := s.jobsAdmin(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := do(r.Context(), r.PathValue("id"))
	switch {
	case errors.Is(err, queue.ErrBadCommand), res.Refused == queue.RefusedNotFound:
		err = fmt.Errorf("%w: no such job", ErrNotFound)
	case err != nil:
		err = fmt.Errorf("%w: %w", ErrUnavailable, err)
	case res.Refused == queue.RefusedNotDead:
		err = fmt.Errorf("%w: job %s is %s; only a dead job is replayed", ErrConflict, res.ID, res.State)
	case res.Refused != "":
		err = fmt.Errorf("%w: %s", ErrConflict, res.Refused)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": res.ID, "state": res.State})
}

// jobsAdmin gates the job management endpoints: a node without a queue
// has none, and the rest need the admin token.
func (s *Server) jobsAdmin(r *http.Request) error {
	if s.cfg.Jobs == nil {
		return fmt.Errorf("%w: %s %s", ErrNotFound, r.Method, r.URL.Path)
	}
	return s.checkAdmin(r)
}
