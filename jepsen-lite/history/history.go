package history

import "time"

// Op types, as in Jepsen: an invoke, then exactly one completion.
const (
	Invoke = "invoke"
	OK     = "ok"   // a 2xx answer
	Fail   = "fail" // a definite error answer (4xx/5xx problem)
	Info   = "info" // indeterminate: timeout, connection error
)

// Op functions (Op.F).
const (
	// FRead is a GET of a cached resource (the comments route).
	FRead = "read"
	// FSession is a GET of the demo upstream's per-user page
	// (/api/session): never cached, judged by cookie-isolation.
	FSession = "session"
)

// Op is one client operation event. Times are nanoseconds since the run
// started.
type Op struct {
	Type    string `json:"type"`
	Process int    `json:"process"` // client id
	Node    string `json:"node"`    // node the request went to
	F       string `json:"f"`       // FRead or FSession
	Tenant  string `json:"tenant"`  // X-Tenant sent
	Key     string `json:"key"`     // path below the route prefix, with query
	Time    int64  `json:"time"`    // ns since start
	Status  int    `json:"status,omitempty"`
	XCache  string `json:"x_cache,omitempty"`
	Owner   string `json:"owner,omitempty"` // X-Levee-Owner
	Latency int64  `json:"latency,omitempty"`
	// From the demo upstream's tagged body (ok ops only):
	BodyTenant string    `json:"body_tenant,omitempty"`
	BodyKey    string    `json:"body_key,omitempty"`
	Version    int64     `json:"version,omitempty"`
	FetchedAt  time.Time `json:"fetched_at,omitzero"`
	Error      string    `json:"error,omitempty"`
	// Session is the sid cookie the process sent (its user), on the
	// invoke and the completion; "" when it sent none (a first visit, or
	// any FRead).
	Session string `json:"session,omitempty"`
	// SetCookies are the sid values of the answer's Set-Cookie headers,
	// in order; recorded on every completion that got an answer.
	SetCookies []string `json:"set_cookies,omitempty"`
	// From a session body's data (ok FSession ops only): the session the
	// page is for, its mint id, and whether the answer minted it.
	BodySession string `json:"body_session,omitempty"`
	Mint        string `json:"mint,omitempty"`
	NewSession  bool   `json:"new_session,omitempty"`
}

// UpstreamCall is one request the demo upstream received.
type UpstreamCall struct {
	Time      int64  `json:"time"` // arrival, ns since start (harness clock)
	Tenant    string `json:"tenant"`
	Key       string `json:"key"` // upstream path + query, as the demo logs it
	Status    int    `json:"status"`
	Node      string `json:"node,omitempty"`
	RequestID string `json:"request_id"`
	// Method is the request's method; "" in a history that predates the
	// field (every call was then a GET).
	Method string `json:"method,omitempty"`
	// IdempotencyKey is the request's Idempotency-Key: every delivery of
	// a Levee job carries its job's (the client's, else "levee-<id>").
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// Conditional: the call carried If-None-Match / If-Modified-Since.
	Conditional bool `json:"conditional,omitempty"`
	// Fault is the upstream fault mode that decided the answer, "" if none.
	Fault string `json:"fault,omitempty"`
	// Answered is when the upstream sent its answer, ns since start; 0
	// when it sent none (Status 0) or the history predates the field.
	Answered int64 `json:"answered,omitempty"`
	// RetryAfter is the Retry-After header the answer carried, as sent
	// (delta-seconds or an HTTP-date); "" when it had none.
	RetryAfter string `json:"retry_after,omitempty"`
	// Session, Mint and NewSession: what a /api/session answer was for
	// (the session it named, its mint id, whether it minted the session);
	// empty on every other call. Such answers are per-user, so the cache
	// checkers leave these calls out.
	Session    string `json:"session,omitempty"`
	Mint       string `json:"mint,omitempty"`
	NewSession bool   `json:"new_session,omitempty"`
}

// Enqueue is one write sent with Prefer: respond-async (a job for Levee's
// durable queue) and what it was answered. Times are ns since start.
type Enqueue struct {
	// Type is OK for a 202 Accepted, Fail for any other answer (a 503
	// refusal: not committed, or the queue is full), Info for none.
	Type    string `json:"type"`
	Process int    `json:"process"`
	Node    string `json:"node"`
	Tenant  string `json:"tenant"`
	Path    string `json:"path"` // below the route prefix
	// Key is the client's Idempotency-Key, "" when it sent none (Levee
	// then keys the job "levee-<id>").
	Key string `json:"key,omitempty"`
	// Repeat marks the second send of Key, through another node.
	Repeat bool  `json:"repeat,omitempty"`
	Invoke int64 `json:"invoke"`
	Time   int64 `json:"time"` // completion
	Status int   `json:"status,omitempty"`
	// ID and State are the 202's job; Location its Location header.
	ID         string `json:"id,omitempty"`
	State      string `json:"state,omitempty"`
	Location   string `json:"location,omitempty"`
	RetryAfter string `json:"retry_after,omitempty"`
	Error      string `json:"error,omitempty"`
}

// JobStatus is one node's answer to GET /-/jobs/{id} once the run is
// over: the state the drain ended on for an accepted job.
type JobStatus struct {
	Time int64  `json:"time"`
	Node string `json:"node"`
	ID   string `json:"id"`
	// Status is the GET's HTTP status; 0 when the node did not answer.
	Status    int    `json:"status,omitempty"`
	State     string `json:"state,omitempty"`
	Attempts  int    `json:"attempts,omitempty"`
	LastError string `json:"last_error,omitempty"`
	// Response is the status of the upstream answer the job kept.
	Response int `json:"response,omitempty"`
	// AdminOnly: the job's tenant header got a 404 and only the admin
	// token read it.
	AdminOnly bool `json:"admin_only,omitempty"`
	// Polls counts the GETs of this job during the drain.
	Polls int `json:"polls"`
	// Error is why the GET got no answer (or an unreadable one).
	Error string `json:"error,omitempty"`
}

// BreakerSample is one node's /-/breakers view of one route.
type BreakerSample struct {
	Time  int64  `json:"time"`
	Node  string `json:"node"`
	Route string `json:"route"`
	State string `json:"state"` // closed, open, half-open; "" when unreachable
	Term  uint64 `json:"term,omitempty"`
	Index uint64 `json:"index,omitempty"`
	Guard string `json:"guard,omitempty"` // local guard state
	// Prober is the node holding the half-open probe, when there is one.
	Prober string `json:"prober,omitempty"`
	// Transitions counts the committed table's state changes for the
	// route; with Since and Forced it identifies the committed state, so a
	// restarted node can be compared with what was committed before.
	Transitions uint64    `json:"transitions,omitempty"`
	Since       time.Time `json:"since,omitzero"` // time of the last transition
	Forced      bool      `json:"forced,omitempty"`
	// CatchingUp: the node has not caught up with the cluster's committed
	// log since it started, so the table shown may be stale.
	CatchingUp bool `json:"catching_up,omitempty"`
}

// Fault is one nemesis window.
type Fault struct {
	Kind    string   `json:"kind"` // isolate-node, isolate-leader, isolate-owner, halves, majorities-ring, bridge, kill, kill-leader, kill-minority, pause, loss, delay, restart-all, kill-all, rolling-restart, upstream-down, upstream-429, upstream-slow, upstream-5xx, upstream-reset
	Targets []string `json:"targets,omitempty"`
	Start   int64    `json:"start"`
	End     int64    `json:"end"`               // 0 while open
	Skipped string   `json:"skipped,omitempty"` // why it could not run here
	// Groups are the sides of a partition (a node in two groups bridges
	// them); empty for faults that are not partitions.
	Groups [][]string `json:"groups,omitempty"`
	// Note says what the nemesis found or did (leader, owner, errors).
	Note string `json:"note,omitempty"`
	// Killed lists the targets of a graceful stop (restart-all) that were
	// still running backend.StopTimeout after SIGTERM and were SIGKILLed:
	// they saved nothing on the way down.
	Killed []string `json:"killed,omitempty"`
	// Steps are a rolling restart's turns, one node each, in order; empty
	// for every other kind. A step's node is the only one down during it.
	Steps []Step `json:"steps,omitempty"`
}

// Step is one node's turn in a rolling restart. Times are ns since start;
// 0 means it did not happen.
type Step struct {
	Node  string `json:"node"`
	Stop  int64  `json:"stop"`  // SIGTERM sent
	Ready int64  `json:"ready"` // started again and answering /-/readyz
	// Rejoined is when every node again saw all nodes alive, named the
	// same leader and listed every node as a voter (the roll waits for it
	// before the next node); 0 when that did not happen within the wait.
	Rejoined int64 `json:"rejoined"`
}

// Membership is one node's view of the cluster, sampled.
type Membership struct {
	Time    int64    `json:"time"`
	Node    string   `json:"node"`
	Alive   []string `json:"alive"`
	Leader  string   `json:"leader"`
	Reached bool     `json:"reached"`
	// Ring lists the members with a ring share > 0 in this node's view.
	Ring []string `json:"ring,omitempty"`
	// Term is this node's Raft term.
	Term uint64 `json:"term,omitempty"`
	// RaftState is this node's Raft role (Leader, Follower, Candidate).
	RaftState string `json:"raft_state,omitempty"`
	// Voters is the voter set of this node's latest Raft configuration.
	Voters []string `json:"voters,omitempty"`
}

// Resources is one node process's resource use, sampled (a soak run:
// jepsen-lite -sample-resources). RSS and FDs come from /proc, Goroutines
// from the node's /metrics (go_goroutines); -1 where that read failed.
type Resources struct {
	Time int64  `json:"time"`
	Node string `json:"node"`
	PID  int    `json:"pid"`
	RSS  int64  `json:"rss"` // bytes, /proc/PID/status VmRSS
	// RSSAnon and RSSFile split RSS (RssAnon, RssFile): heap and stacks,
	// and mapped files (the binary's pages, raft.db through bolt's mmap).
	RSSAnon int64 `json:"rss_anon,omitempty"`
	RSSFile int64 `json:"rss_file,omitempty"`
	FDs     int   `json:"fds"` // entries of /proc/PID/fd
	// Sockets is how many of FDs are sockets (their link reads
	// "socket:[…]"): connections and listeners, which follow the traffic,
	// against files, which a leak of handles would grow. Recorded for
	// diagnosis; 0 in histories that predate it.
	Sockets    int `json:"sockets,omitempty"`
	Goroutines int `json:"goroutines"`
}
