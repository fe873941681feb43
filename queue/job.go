package queue

import (
	"net/http"
)

// State is where a job is in its life.
type State string

// The states of a job.
const (
	Queued  State = "queued"  // waiting for its first attempt, or replayed
	Delayed State = "delayed" // waiting until NextAt for its next attempt
	Running State = "running" // leased to a node until LeaseUntil
	Done    State = "done"    // the upstream accepted it; Response holds the answer
	Dead    State = "dead"    // dead-lettered: not retried unless replayed
)

// Valid reports whether s is one of the states.
func (s State) Valid() bool {
	switch s {
	case Queued, Delayed, Running, Done, Dead:
		return true
	}
	return false
}

// Request is what a client asked the upstream to do: the proxy request as
// the api parsed it, with the tenant it resolved.
type Request struct {
	Route    string      `msgpack:"route"`
	Tenant   string      `msgpack:"tenant"`
	Method   string      `msgpack:"method"`
	Path     string      `msgpack:"path"` // escaped, below the route prefix
	RawQuery string      `msgpack:"query"`
	Header   http.Header `msgpack:"header"`
	Body     []byte      `msgpack:"body"`
	// Key is the Idempotency-Key every attempt carries: the client's
	// (ClientKey), else one Levee made for the job, the same on every
	// attempt, so the provider can drop a redelivery.
	Key       string `msgpack:"key"`
	ClientKey bool   `msgpack:"ckey"`
	// Host is the upstream host the route calls (hostkey.Of): jobs are
	// paced per host.
	Host string `msgpack:"host"`
}

// Response is the upstream's answer to a job's last attempt, its body cut
// to the queue's response_body_limit (Truncated says so).
type Response struct {
	Status    int         `msgpack:"status"`
	Header    http.Header `msgpack:"header"`
	Body      []byte      `msgpack:"body"`
	Truncated bool        `msgpack:"trunc"`
}

// Job is one job as the Table holds it. Times are leader-stamped unix
// nanoseconds.
type Job struct {
	ID  string  `msgpack:"id"`
	Req Request `msgpack:"req"`

	State    State `msgpack:"state"`
	Attempts int   `msgpack:"attempts"` // attempts that reached the upstream or failed on the way
	// CreatedAt is when the job was committed; NextAt, when it may next be
	// leased (queued and delayed jobs).
	CreatedAt int64 `msgpack:"created"`
	NextAt    int64 `msgpack:"next"`
	// Node holds the job's lease until LeaseUntil while running; after
	// that any deliverer may lease it again.
	Node       string    `msgpack:"node"`
	LeaseUntil int64     `msgpack:"lease"`
	LastError  string    `msgpack:"err"`
	Response   *Response `msgpack:"resp"`
	FinishedAt int64     `msgpack:"finished"` // done or dead
}

// size is what the job counts against MaxBytes.
func (j *Job) size() int64 {
	n := int64(len(j.Req.Body) + len(j.Req.Path) + len(j.Req.RawQuery) + len(j.LastError) + 256)
	n += headerSize(j.Req.Header)
	if j.Response != nil {
		n += int64(len(j.Response.Body)) + headerSize(j.Response.Header)
	}
	return n
}

func headerSize(h http.Header) int64 {
	var n int64
	for k, vs := range h {
		for _, v := range vs {
			n += int64(len(k) + len(v) + 4)
		}
	}
	return n
}

// clone is a deep copy the caller may keep.
func (j *Job) clone() Job {
	c := *j
	c.Req.Header = j.Req.Header.Clone()
	c.Req.Body = append([]byte(nil), j.Req.Body...)
	if j.Response != nil {
		r := *j.Response
		r.Header = j.Response.Header.Clone()
		r.Body = append([]byte(nil), j.Response.Body...)
		c.Response = &r
	}
	return c
}

// dedupKey is the key a client's Idempotency-Key is unique under: the
// same key on another route or tenant is another job.
func dedupKey(r *Request) string {
	return r.Route + "\x00" + r.Tenant + "\x00" + r.Key
}
