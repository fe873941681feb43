package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/levee/levee/consensus"
	"github.com/levee/levee/peer"
	"github.com/levee/levee/proxy"
	"github.com/levee/levee/queue"
)

// localJobs is a queue.Service whose log is this process: each command is
// applied to its Table at once, or fails with fail when that is set. The
// first Submits play steps instead, when given. No leader and not the
// leader prove a command uncommitted, as control.Uncommitted says.
type localJobs struct {
	*queue.Service
	fail    error
	steps   []logStep
	submits int
}

// logStep is one Submit: apply the command or not, then answer err.
type logStep struct {
	apply bool
	err   error
}

func newLocalJobs(bounds queue.Bounds) *localJobs {
	lj := &localJobs{}
	table := queue.NewTable()
	lj.Service = &queue.Service{Node: "n1", Table: table, Bounds: bounds, Now: func() time.Time { return fixedNow },
		CommitWait: 200 * time.Millisecond,
		Uncommitted: func(err error) bool {
			return errors.Is(err, consensus.ErrNoLeader) || errors.Is(err, consensus.ErrNotLeader)
		},
		Submit: func(_ context.Context, data []byte) ([]byte, error) {
			step := logStep{apply: lj.fail == nil, err: lj.fail}
			if lj.submits < len(lj.steps) {
				step = lj.steps[lj.submits]
			}
			lj.submits++
			var res queue.Result
			if step.apply {
				c, err := queue.DecodeCommand(data)
				if err != nil {
					return nil, err
				}
				res = table.Apply(c)
			}
			if step.err != nil {
				return nil, step.err
			}
			return res.Encode()
		}}
	return lj
}

var roomyBounds = queue.Bounds{MaxJobs: 100, MaxBytes: 1 << 20}

// jobsServer is a test server with a queue, an admin token, and the
// comments route calling host api:443.
func jobsServer(t *testing.T, eng *fakeEngine, jobs *localJobs, edit func(*Config)) *Server {
	return newTestServer(t, eng, func(c *Config) {
		c.Jobs, c.AdminToken = jobs, "tok"
		c.Routes = []RouteInfo{{Name: "comments", Prefix: "/comments/", TenantHeader: "X-Tenant", Host: "https://api:443"},
			{Name: "always", Prefix: "/always/", Host: "https://api:443", QueueAlways: true}}
		if edit != nil {
			edit(c)
		}
	})
}

func request(method, target, body string, kv ...string) *http.Request {
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	for i := 0; i+1 < len(kv); i += 2 {
		r.Header.Add(kv[i], kv[i+1])
	}
	return r
}

type accepted struct {
	ID    string      `json:"id"`
	State queue.State `json:"state"`
}

func mustAccept(t *testing.T, w *httptest.ResponseRecorder) accepted {
	t.Helper()
	var a accepted
	if w.Code != http.StatusAccepted || json.Unmarshal(w.Body.Bytes(), &a) != nil || a.ID == "" || a.State != queue.Queued ||
		w.Header().Get("Location") != "/-/jobs/"+a.ID {
		t.Fatalf("answer %d %v %s, want 202 with the job's Location and state queued", w.Code, w.Header(), w.Body)
	}
	return a
}

// TestPreferRespondAsyncIsReadAsRFC7240Says: the preference is found among
// others, in any case, with parameters, in any of several fields; a
// longer token or another preference is not it.
func TestPreferRespondAsyncIsReadAsRFC7240Says(t *testing.T) {
	for _, tt := range []struct {
		values []string
		want   bool
	}{
		{[]string{"respond-async"}, true},
		{[]string{"RESPOND-ASYNC"}, true},
		{[]string{"wait=10, respond-async"}, true},
		{[]string{" respond-async ; foo=bar"}, true},
		{[]string{"handling=lenient", "respond-async"}, true},
		{[]string{"respond-asyncx"}, false},
		{[]string{"return=minimal, wait=5"}, false},
		{nil, false},
	} {
		h := http.Header{"Prefer": tt.values}
		if got := prefersAsync(h); got != tt.want {
			t.Errorf("Prefer %q: %v, want %v", tt.values, got, tt.want)
		}
	}
}

// TestAQueuedWriteIsAnswered202AndKeptAsSent: a POST with Prefer:
// respond-async is committed and answered 202 with its Location and
// Preference-Applied, without calling the upstream; the job keeps the
// method, path, query, body, tenant and host, and not the client's
// Idempotency-Key or Prefer fields (every attempt sets its own key).
func TestAQueuedWriteIsAnswered202AndKeptAsSent(t *testing.T) {
	eng := &fakeEngine{resp: okResponse()}
	jobs := newLocalJobs(roomyBounds)
	s := jobsServer(t, eng, jobs, nil)
	w := serve(t, s, request(http.MethodPost, "/comments/orders?x=1", `{"n":1}`,
		"Prefer", "respond-async", "X-Tenant", "acme", "Idempotency-Key", "k1", "Content-Type", "application/json"))
	a := mustAccept(t, w)
	if w.Header().Get("Preference-Applied") != "respond-async" || len(eng.requests()) != 0 {
		t.Fatalf("Preference-Applied %q, engine calls %d: want the preference applied and no call", w.Header().Get("Preference-Applied"), len(eng.requests()))
	}
	j, ok := jobs.Job(a.ID)
	r := j.Req
	if !ok || r.Method != http.MethodPost || r.Path != "orders" || r.RawQuery != "x=1" || string(r.Body) != `{"n":1}` ||
		r.Tenant != "acme" || r.Host != "https://api:443" || r.Key != "k1" || !r.ClientKey ||
		r.Header.Get("Idempotency-Key") != "" || r.Header.Get("Prefer") != "" || r.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("stored job %+v", j)
	}
	again := mustAccept(t, serve(t, s, request(http.MethodPost, "/comments/orders?x=1", `{"n":1}`,
		"Prefer", "respond-async", "X-Tenant", "acme", "Idempotency-Key", "k1")))
	if again.ID != a.ID {
		t.Fatalf("the same Idempotency-Key gave job %s, then %s", a.ID, again.ID)
	}
}

// TestWhichRequestsAreQueued: a write with the preference, or any write on
// a route that queues always, is queued; a read, or a write without the
// preference on another route, is served at once; a node without a queue
// serves even a write that prefers async (RFC 7240 lets a server ignore a
// preference) and has no /-/jobs.
func TestWhichRequestsAreQueued(t *testing.T) {
	for _, tt := range []struct {
		name    string
		req     *http.Request
		noQueue bool
		queued  bool
	}{
		{"POST preferring async", request(http.MethodPost, "/comments/a", "{}", "Prefer", "respond-async"), false, true},
		{"DELETE preferring async", request(http.MethodDelete, "/comments/a", "", "Prefer", "respond-async"), false, true},
		{"GET preferring async", request(http.MethodGet, "/comments/a", "", "Prefer", "respond-async"), false, false},
		{"POST without the preference", request(http.MethodPost, "/comments/a", "{}"), false, false},
		{"PUT on a queue: always route", request(http.MethodPut, "/always/a", "{}"), false, true},
		{"GET on a queue: always route", request(http.MethodGet, "/always/a", ""), false, false},
		{"no queue on this node", request(http.MethodPost, "/comments/a", "{}", "Prefer", "respond-async"), true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			eng := &fakeEngine{resp: okResponse()}
			s := jobsServer(t, eng, newLocalJobs(roomyBounds), func(c *Config) {
				if tt.noQueue {
					c.Jobs = nil
				}
			})
			w := serve(t, s, tt.req)
			if got := w.Code == http.StatusAccepted; got != tt.queued || len(eng.requests()) == 0 == !tt.queued {
				t.Fatalf("answer %d with %d engine calls, want queued %v", w.Code, len(eng.requests()), tt.queued)
			}
			if tt.queued && tt.req.Header.Get("Prefer") == "" && w.Header().Get("Preference-Applied") != "" {
				t.Fatal("Preference-Applied without a preference")
			}
		})
	}
}

// TestAJobIsReadOnlyByItsTenantOrTheAdmin: a job's status is the tenant's
// that enqueued it; another tenant, or none, gets the 404 an unknown id
// gets; the admin token reads any job.
func TestAJobIsReadOnlyByItsTenantOrTheAdmin(t *testing.T) {
	s := jobsServer(t, &fakeEngine{resp: okResponse()}, newLocalJobs(roomyBounds), nil)
	a := mustAccept(t, serve(t, s, request(http.MethodPost, "/comments/a", "{}", "Prefer", "respond-async", "X-Tenant", "acme")))
	for _, tt := range []struct {
		name string
		kv   []string
		want int
	}{
		{"its tenant", []string{"X-Tenant", "acme"}, http.StatusOK},
		{"another tenant", []string{"X-Tenant", "globex"}, http.StatusNotFound},
		{"no tenant", nil, http.StatusNotFound},
		{"the admin", []string{"Authorization", "Bearer tok"}, http.StatusOK},
		{"a wrong token", []string{"Authorization", "Bearer nope"}, http.StatusNotFound},
	} {
		w := serve(t, s, request(http.MethodGet, "/-/jobs/"+a.ID, "", tt.kv...))
		if w.Code != tt.want {
			t.Errorf("%s: %d, want %d", tt.name, w.Code, tt.want)
			continue
		}
		var v JobView
		if tt.want == http.StatusOK && (json.Unmarshal(w.Body.Bytes(), &v) != nil || v.ID != a.ID || v.State != queue.Queued || v.NextAttemptAt == nil) {
			t.Errorf("%s: %s, want the queued job with its next attempt time", tt.name, w.Body)
		}
	}
}

// TestCredentialTenantsKeepTheirOwnJobs: on a route whose tenant comes
// from an API key, the same Idempotency-Key sent by two tenants makes two
// jobs, each with its own write, and only a key of the job's tenant (or
// the admin token) reads it; naming the tenant in another header does not.
// Before the tenant was the engine's, every such job had no tenant: the
// second tenant got the first one's job (its write lost) and read it.
func TestCredentialTenantsKeepTheirOwnJobs(t *testing.T) {
	jobs := newLocalJobs(roomyBounds)
	s := jobsServer(t, &fakeEngine{resp: okResponse()}, jobs, func(c *Config) {
		c.Routes = append(c.Routes, RouteInfo{Name: "keyed", Prefix: "/keyed/", Host: "https://api:443"})
	})
	post := func(who, key string) accepted {
		t.Helper()
		return mustAccept(t, serve(t, s, request(http.MethodPost, "/keyed/orders", `{"who":"`+who+`"}`,
			"Prefer", "respond-async", "X-Api-Key", key, "Idempotency-Key", "order-1")))
	}
	acme, globex := post("acme", "acme-secret"), post("globex", "globex-secret")
	if globex.ID == acme.ID {
		t.Fatal("globex answered 202 with acme's job: its write never runs")
	}
	for id, want := range map[string]string{acme.ID: "acme", globex.ID: "globex"} {
		if j, ok := jobs.Job(id); !ok || j.Req.Tenant != want || string(j.Req.Body) != `{"who":"`+want+`"}` {
			t.Errorf("job %s: tenant %q body %s, want %s's own write", id, j.Req.Tenant, j.Req.Body, want)
		}
	}
	if again := post("acme", "acme-secret"); again.ID != acme.ID {
		t.Errorf("acme's second order-1 made job %s, want its first, %s", again.ID, acme.ID)
	}
	for _, tt := range []struct {
		name, id string
		kv       []string
		want     int
	}{
		{"acme reads its job", acme.ID, []string{"X-Api-Key", "acme-secret"}, http.StatusOK},
		{"globex reads its job", globex.ID, []string{"X-Api-Key", "globex-secret"}, http.StatusOK},
		{"globex reads acme's", acme.ID, []string{"X-Api-Key", "globex-secret"}, http.StatusNotFound},
		{"an unknown key", acme.ID, []string{"X-Api-Key", "guess"}, http.StatusNotFound},
		{"no key", acme.ID, nil, http.StatusNotFound},
		{"a claimed tenant header", acme.ID, []string{"X-Tenant", "acme"}, http.StatusNotFound},
		{"two keys", acme.ID, []string{"X-Api-Key", "acme-secret", "X-Api-Key", "globex-secret"}, http.StatusNotFound},
		{"the admin", acme.ID, []string{"Authorization", "Bearer tok"}, http.StatusOK},
	} {
		if w := serve(t, s, request(http.MethodGet, "/-/jobs/"+tt.id, "", tt.kv...)); w.Code != tt.want {
			t.Errorf("%s: %d, want %d", tt.name, w.Code, tt.want)
		}
	}
}

// TestAnEnqueueThatCannotBeKeptAnswers503: a full queue and an enqueue
// that did not commit (no quorum) are both 503 with Retry-After, and
// nothing is promised; an Idempotency-Key past its bound is a 400.
func TestAnEnqueueThatCannotBeKeptAnswers503(t *testing.T) {
	jobs := newLocalJobs(queue.Bounds{MaxJobs: 1, MaxBytes: 1 << 20})
	s := jobsServer(t, &fakeEngine{resp: okResponse()}, jobs, nil)
	mustAccept(t, serve(t, s, request(http.MethodPost, "/comments/a", "{}", "Prefer", "respond-async")))
	w := serve(t, s, request(http.MethodPost, "/comments/b", "{}", "Prefer", "respond-async"))
	if p := checkProblem(t, w.Code, w.Header(), w.Body, http.StatusServiceUnavailable); p.Title != "queue full" || w.Header().Get("Retry-After") == "" {
		t.Fatalf("full queue: %+v, Retry-After %q", p, w.Header().Get("Retry-After"))
	}
	jobs.fail = fmt.Errorf("%w: context deadline exceeded", consensus.ErrNoLeader)
	w = serve(t, s, request(http.MethodPost, "/comments/c", "{}", "Prefer", "respond-async"))
	if p := checkProblem(t, w.Code, w.Header(), w.Body, http.StatusServiceUnavailable); p.Title != "cluster unavailable" || w.Header().Get("Retry-After") == "" {
		t.Fatalf("uncommitted enqueue: %+v", p)
	}
	w = serve(t, s, request(http.MethodPost, "/comments/d", "{}", "Prefer", "respond-async", "Idempotency-Key", strings.Repeat("k", 300)))
	checkProblem(t, w.Code, w.Header(), w.Body, http.StatusBadRequest)
}

// TestAnEnqueueWhoseCommitIsUnknownIsNever503: an enqueue whose proposal
// may have committed (leadership lost mid-commit, a leader that could not
// act, a timeout: consensus.ErrTimeout) is submitted again as the same job
// until it commits, making one job; if it never says, the answer is a 504
// outcome-unknown naming the job's Location, never the 503 that tells
// the client nothing was promised and invites it to send the write again.
// Only a commit that provably never reached the log is a 503.
func TestAnEnqueueWhoseCommitIsUnknownIsNever503(t *testing.T) {
	lost := fmt.Errorf("%w: outcome unknown: leadership lost while committing log", consensus.ErrTimeout)
	busy := fmt.Errorf("%w: %w: consensus: timeout", consensus.ErrTimeout, peer.ErrLeaderBusy)
	noLeader := fmt.Errorf("%w: context deadline exceeded", consensus.ErrNoLeader)
	for _, tc := range []struct {
		name     string
		steps    []logStep
		fail     error // after the steps
		want     int
		wantJobs int
	}{
		{"committed, then leadership lost", []logStep{{apply: true, err: lost}}, nil, http.StatusAccepted, 1},
		{"leadership lost before it committed", []logStep{{err: lost}}, nil, http.StatusAccepted, 1},
		{"the leader could not act, then no leader", []logStep{{apply: true, err: busy}, {err: noLeader}}, nil, http.StatusAccepted, 1},
		{"leadership lost, then never known", nil, lost, http.StatusGatewayTimeout, 0},
		{"committed, then never known", []logStep{{apply: true, err: lost}}, lost, http.StatusGatewayTimeout, 1},
		{"unknown, then no leader", []logStep{{err: busy}}, noLeader, http.StatusGatewayTimeout, 0},
		{"no leader", nil, noLeader, http.StatusServiceUnavailable, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jobs := newLocalJobs(roomyBounds)
			jobs.steps, jobs.fail = tc.steps, tc.fail
			s := jobsServer(t, &fakeEngine{resp: okResponse()}, jobs, nil)
			w := serve(t, s, request(http.MethodPost, "/comments/a", "{}", "Prefer", "respond-async", "X-Tenant", "acme"))
			if got := jobs.Table.Stats().Jobs; w.Code != tc.want || got != tc.wantJobs {
				t.Fatalf("%d with %d jobs, want %d with %d: %s", w.Code, got, tc.want, tc.wantJobs, w.Body)
			}
			switch tc.want {
			case http.StatusAccepted:
				mustAccept(t, w)
			case http.StatusGatewayTimeout:
				p := checkProblem(t, w.Code, w.Header(), w.Body, tc.want)
				loc := w.Header().Get("Location")
				if p.Type != "urn:levee:problem:outcome-unknown" || !strings.HasPrefix(loc, "/-/jobs/") || len(loc) != len("/-/jobs/")+32 ||
					w.Header().Get("Retry-After") != "" {
					t.Fatalf("problem %+v, Location %q, Retry-After %q: want outcome-unknown naming the job, no Retry-After",
						p, loc, w.Header().Get("Retry-After"))
				}
				want := map[int]int{0: http.StatusNotFound, 1: http.StatusOK}[tc.wantJobs]
				if r := serve(t, s, request(http.MethodGet, loc, "", "X-Tenant", "acme")); r.Code != want {
					t.Fatalf("GET the Location: %d, want %d", r.Code, want)
				}
			case http.StatusServiceUnavailable:
				if p := checkProblem(t, w.Code, w.Header(), w.Body, tc.want); p.Title != "cluster unavailable" || w.Header().Get("Location") != "" {
					t.Fatalf("problem %+v, Location %q: want nothing promised", p, w.Header().Get("Location"))
				}
			}
		})
	}
}

// TestJobManagementNeedsTheAdminToken: listing, replaying and deleting
// jobs answer 401 without the token and 403 on a node with none set.
func TestJobManagementNeedsTheAdminToken(t *testing.T) {
	for _, token := range []string{"tok", ""} {
		s := jobsServer(t, &fakeEngine{resp: okResponse()}, newLocalJobs(roomyBounds), func(c *Config) { c.AdminToken = token })
		want := http.StatusUnauthorized
		if token == "" {
			want = http.StatusForbidden
		}
		id := strings.Repeat("a", 32)
		for _, r := range []*http.Request{
			request(http.MethodGet, "/-/jobs?state=dead", ""),
			request(http.MethodPost, "/-/jobs/"+id+"/replay", ""),
			request(http.MethodDelete, "/-/jobs/"+id, ""),
		} {
			if w := serve(t, s, r); w.Code != want {
				t.Errorf("token %q: %s %s: %d, want %d", token, r.Method, r.URL, w.Code, want)
			}
		}
	}
}

// TestTheJobListPagesAndFilters: GET /-/jobs pages oldest first with a
// next cursor, filters by state, and refuses an unknown state or a limit
// out of bounds; replay and delete of an unknown job are 404s.
func TestTheJobListPagesAndFilters(t *testing.T) {
	jobs := newLocalJobs(roomyBounds)
	s := jobsServer(t, &fakeEngine{resp: okResponse()}, jobs, nil)
	var ids []string
	for k := range 5 {
		ids = append(ids, mustAccept(t, serve(t, s, request(http.MethodPost, fmt.Sprintf("/comments/%d", k), "{}", "Prefer", "respond-async"))).ID)
	}
	var got []string
	after := ""
	for range 5 {
		w := serve(t, s, request(http.MethodGet, "/-/jobs?state=queued&limit=2&after="+after, "", "Authorization", "Bearer tok"))
		var page struct {
			Jobs []JobView `json:"jobs"`
			Next string    `json:"next"`
		}
		if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &page) != nil || len(page.Jobs) > 2 {
			t.Fatalf("page after %q: %d %s", after, w.Code, w.Body)
		}
		for _, v := range page.Jobs {
			got = append(got, v.ID)
		}
		if after = page.Next; after == "" {
			break
		}
	}
	if len(got) != 5 {
		t.Fatalf("paged %d jobs (%v), want the 5 enqueued", len(got), got)
	}
	for _, q := range []string{"state=gone", "limit=0", "limit=5000", "limit=x"} {
		if w := serve(t, s, request(http.MethodGet, "/-/jobs?"+q, "", "Authorization", "Bearer tok")); w.Code != http.StatusBadRequest {
			t.Errorf("GET /-/jobs?%s: %d, want 400", q, w.Code)
		}
	}
	if w := serve(t, s, request(http.MethodGet, "/-/jobs?state=dead", "", "Authorization", "Bearer tok")); !strings.Contains(w.Body.String(), `"jobs": []`) {
		t.Errorf("no dead jobs: %s, want an empty list", w.Body)
	}
	for _, r := range []*http.Request{
		request(http.MethodPost, "/-/jobs/"+strings.Repeat("b", 32)+"/replay", "", "Authorization", "Bearer tok"),
		request(http.MethodDelete, "/-/jobs/not-an-id", "", "Authorization", "Bearer tok"),
	} {
		if w := serve(t, s, r); w.Code != http.StatusNotFound {
			t.Errorf("%s %s: %d, want 404", r.Method, r.URL, w.Code)
		}
	}
	if w := serve(t, s, request(http.MethodPost, "/-/jobs/"+ids[0]+"/replay", "", "Authorization", "Bearer tok")); w.Code != http.StatusConflict {
		t.Errorf("replay of a queued job: %d, want 409", w.Code)
	}
}

// TestTheAppPortKeepsAJobsStatusUnderAdminSeparate: with the admin
// endpoints on their own port, the app port still answers a job's
// Location (the client's) but not the job list.
func TestTheAppPortKeepsAJobsStatusUnderAdminSeparate(t *testing.T) {
	s := jobsServer(t, &fakeEngine{resp: okResponse()}, newLocalJobs(roomyBounds), func(c *Config) { c.AdminSeparate = true })
	a := mustAccept(t, serve(t, s, request(http.MethodPost, "/comments/a", "{}", "Prefer", "respond-async", "X-Tenant", "acme")))
	if w := serve(t, s, request(http.MethodGet, "/-/jobs/"+a.ID, "", "X-Tenant", "acme")); w.Code != http.StatusOK {
		t.Fatalf("job status on the app port: %d, want 200", w.Code)
	}
	if w := serve(t, s, request(http.MethodGet, "/-/jobs", "", "Authorization", "Bearer tok")); w.Code != http.StatusNotFound {
		t.Fatalf("job list on the app port: %d, want 404", w.Code)
	}
}

// TestAJobKeyedOnTheClientsAddressIsNotReadByAnotherAddressClaimingIt: on
// a route whose tenant is X-Forwarded-For (Levee sets it from the
// connection), a job is its address's; a reader from another address
// that sends the job's address in its own X-Forwarded-For reads nothing:
// the reader's tenant comes from its cleaned header, as the job's did.
func TestAJobKeyedOnTheClientsAddressIsNotReadByAnotherAddressClaimingIt(t *testing.T) {
	fakeTenancy["forwarded"] = &proxy.Route{Name: "forwarded", TenantHeader: "X-Forwarded-For"}
	t.Cleanup(func() { delete(fakeTenancy, "forwarded") })
	s := jobsServer(t, &fakeEngine{resp: okResponse()}, newLocalJobs(roomyBounds), func(c *Config) {
		c.Routes = append(c.Routes, RouteInfo{Name: "forwarded", Prefix: "/forwarded/", Host: "https://api:443"})
	})
	enq := request(http.MethodPost, "/forwarded/a", "{}", "Prefer", "respond-async")
	enq.RemoteAddr = "192.0.2.7:5000"
	a := mustAccept(t, serve(t, s, enq))
	for _, tt := range []struct {
		name, remote string
		kv           []string
		want         int
	}{
		{"its address", "192.0.2.7:6000", nil, http.StatusOK},
		{"another address", "198.51.100.9:6000", nil, http.StatusNotFound},
		{"another address claiming it", "198.51.100.9:6000", []string{"X-Forwarded-For", "192.0.2.7"}, http.StatusNotFound},
	} {
		r := request(http.MethodGet, "/-/jobs/"+a.ID, "", tt.kv...)
		r.RemoteAddr = tt.remote
		if w := serve(t, s, r); w.Code != tt.want {
			t.Errorf("%s: %d, want %d", tt.name, w.Code, tt.want)
		}
	}
}
