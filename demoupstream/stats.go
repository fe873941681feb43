package demoupstream

import (
	"cmp"
	"slices"
	"sync"
	"time"
)

// Call is one /api/ request in the call log.
type Call struct {
	// Time is when the request arrived, before any latency or fault.
	Time   time.Time `json:"time"`
	Method string    `json:"method"`
	// Key is the path plus canonical query, as in the body tag.
	Key    string `json:"key"`
	Tenant string `json:"tenant"`
	// Status is the HTTP status sent; 0 means no response was written
	// (a "reset" fault, or the client left during a sleep).
	Status int `json:"status"`
	// Conditional is true when the request carried If-None-Match or
	// If-Modified-Since.
	Conditional bool `json:"conditional"`
	// Answered is when the handler finished writing the answer; zero
	// when no response was written (Status 0).
	Answered time.Time `json:"answered,omitzero"`
	// RetryAfter is the Retry-After header the answer carried, as sent
	// (delta-seconds or an HTTP-date); "" when it had none. With Answered
	// it says until when this caller was asked to stay away.
	RetryAfter string `json:"retry_after,omitempty"`
	// Fault is the injected mode that decided the answer, "" if none.
	Fault     string `json:"fault,omitempty"`
	RequestID string `json:"request_id"`
	// Node is the X-Levee-Node request header: which Levee node made the
	// call, so the chaos harness can attribute upstream calls to nodes.
	Node string `json:"node,omitempty"`
	// IdempotencyKey is the request's Idempotency-Key header, cut to
	// MaxLoggedKey bytes so the log stays bounded by LogSize; "" when it
	// had none. Every delivery of a Levee job carries its job's key, so
	// the chaos harness counts deliveries per job from the log.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// Session, Mint and NewSession record what a GET /api/session answer
	// was for: the session it named, its mint id, and whether it minted
	// the session (and sent Set-Cookie). Empty on every other call.
	Session    string `json:"session,omitempty"`
	Mint       string `json:"mint,omitempty"`
	NewSession bool   `json:"new_session,omitempty"`
}

// KeyCalls is the call count of one (tenant, key).
type KeyCalls struct {
	Tenant string `json:"tenant"`
	Key    string `json:"key"`
	Calls  int    `json:"calls"`
}

// Stats is a snapshot of the counters, as GET /-/stats returns it.
type Stats struct {
	// Total counts /api/ requests received since the last reset.
	Total int `json:"total"`
	// InFlight is the number of /api/ requests being handled right now; a
	// gauge, so Reset leaves it alone.
	InFlight int `json:"in_flight"`
	// ByStatus counts finished requests per status (0: no response).
	ByStatus map[int]int `json:"by_status"`
	// ByKey counts received requests per (tenant, key), sorted.
	ByKey []KeyCalls `json:"by_key"`
	// Log is the most recent calls, oldest first, at most Config.LogSize.
	Log []Call `json:"log"`
}

// MaxLoggedKey bounds the Idempotency-Key a Call keeps (Levee sends at
// most 256 bytes).
const MaxLoggedKey = 256

// loggedKey is an Idempotency-Key as the call log keeps it.
func loggedKey(k string) string {
	if len(k) > MaxLoggedKey {
		return k[:MaxLoggedKey]
	}
	return k
}

type tenantKey struct{ tenant, key string }

// stats counts requests on arrival (so a coalescing check sees a call the
// moment it reaches the upstream) and statuses on completion.
type stats struct {
	mu       sync.Mutex
	total    int
	inFlight int
	byKey    map[tenantKey]int
	byStatus map[int]int
	log      []Call // ring of cap size; next is the oldest once full
	next     int
	size     int
}

func newStats(size int) *stats {
	st := &stats{size: size}
	st.reset()
	return st
}

// reset zeroes everything except the in-flight gauge. Caller holds mu (or
// owns st).
func (st *stats) reset() {
	st.total = 0
	st.byKey = make(map[tenantKey]int)
	st.byStatus = make(map[int]int)
	st.log = make([]Call, 0, min(st.size, 1024))
	st.next = 0
}

func (st *stats) begin(tk tenantKey) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.total++
	st.byKey[tk]++
	st.inFlight++
}

func (st *stats) end(c Call) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.inFlight--
	st.byStatus[c.Status]++
	if len(st.log) < st.size {
		st.log = append(st.log, c)
		return
	}
	st.log[st.next] = c
	st.next = (st.next + 1) % st.size
}

func (st *stats) calls(tk tenantKey) int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.byKey[tk]
}

// logCopy returns the log oldest first. Caller holds mu.
func (st *stats) logCopy() []Call {
	out := make([]Call, 0, len(st.log))
	return append(append(out, st.log[st.next:]...), st.log[:st.next]...)
}

func (st *stats) snapshot() Stats {
	st.mu.Lock()
	defer st.mu.Unlock()
	s := Stats{Total: st.total, InFlight: st.inFlight, ByStatus: make(map[int]int, len(st.byStatus)), Log: st.logCopy()}
	for code, n := range st.byStatus {
		s.ByStatus[code] = n
	}
	s.ByKey = make([]KeyCalls, 0, len(st.byKey))
	for tk, n := range st.byKey {
		s.ByKey = append(s.ByKey, KeyCalls{Tenant: tk.tenant, Key: tk.key, Calls: n})
	}
	slices.SortFunc(s.ByKey, func(a, b KeyCalls) int {
		return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.Key, b.Key))
	})
	return s
}
