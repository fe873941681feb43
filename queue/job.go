package queue

import (
	"encoding/binary"
	"maps"
	"net/http"
	"slices"
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

	// flat holds a done job's headers, request and answer, packed (see
	// pack); Req.Header and Response.Header are then nil in the table.
	// Never encoded: clone and the snapshot see the headers as applied.
	flat *flatHeaders
}

// flatHeaders is a done job's headers as name, value pairs. A done job
// is never delivered again (a replay takes dead jobs only), so its
// request headers are kept only to be counted against MaxBytes and
// snapshotted, and its answer's to be shown: as maps, with a slice and
// a string per field, they held about 1.1 KB of a retained job's 1.7 KB
// of heap, many times their text. Packed, the soak's job holds 846 B
// where it held 1,718 (BenchmarkRetainedDoneJobHeap). Packing them
// changes no byte of the state: size, clone and the snapshot read them
// back as they were, so nodes that pack and nodes that do not stay equal.
type flatHeaders struct {
	req, resp       flatHeader
	hasReq, hasResp bool
}

// flatHeader is an http.Header in one string: name, value, name,
// value…, names in order and each name's values in theirs, each field
// preceded by its length (uvarint), so any bytes survive. One string, not
// a slice of them: a field's own string header would cost more than most
// of their text.
type flatHeader string

// flatten packs h, unless h is nil or has a name without values (which
// the pairs could not keep), when it keeps nothing and answers false.
func flatten(h http.Header) (flatHeader, bool) {
	if h == nil {
		return "", false
	}
	n := 0
	for k, vs := range h {
		if len(vs) == 0 {
			return "", false
		}
		for _, v := range vs {
			n += len(k) + len(v) + 2*binary.MaxVarintLen64
		}
	}
	b := make([]byte, 0, n)
	for _, k := range slices.Sorted(maps.Keys(h)) {
		for _, v := range h[k] {
			b = binary.AppendUvarint(b, uint64(len(k)))
			b = append(b, k...)
			b = binary.AppendUvarint(b, uint64(len(v)))
			b = append(b, v...)
		}
	}
	return flatHeader(b), true
}

// pairs calls fn with each name and value of f in order.
func (f flatHeader) pairs(fn func(k, v string)) {
	next := func() string {
		n, w := binary.Uvarint([]byte(f[:min(len(f), binary.MaxVarintLen64)]))
		field := f[w : w+int(n)]
		f = f[w+int(n):]
		return string(field)
	}
	for len(f) > 0 {
		k := next()
		fn(k, next())
	}
}

// header is f as an http.Header of its own (never nil).
func (f flatHeader) header() http.Header {
	h := http.Header{}
	f.pairs(func(k, v string) { h[k] = append(h[k], v) })
	return h
}

func (f flatHeader) size() int64 {
	var n int64
	f.pairs(func(k, v string) { n += int64(len(k) + len(v) + 4) })
	return n
}

// pack flattens a done job's headers (see flatHeaders).
func (j *Job) pack() {
	if j.State != Done || j.flat != nil {
		return
	}
	var p flatHeaders
	if f, ok := flatten(j.Req.Header); ok {
		p.req, p.hasReq, j.Req.Header = f, true, nil
	}
	if j.Response != nil {
		if f, ok := flatten(j.Response.Header); ok {
			r := *j.Response
			p.resp, p.hasResp, r.Header = f, true, nil
			j.Response = &r
		}
	}
	if p.hasReq || p.hasResp {
		j.flat = &p
	}
}

// unpacked is j with its headers as applied (a shallow copy when j is
// packed, j itself otherwise).
func (j *Job) unpacked() *Job {
	if j.flat == nil {
		return j
	}
	u := *j
	if j.flat.hasReq {
		u.Req.Header = j.flat.req.header()
	}
	if j.flat.hasResp {
		r := *j.Response
		r.Header = j.flat.resp.header()
		u.Response = &r
	}
	u.flat = nil
	return &u
}

// size is what the job counts against MaxBytes.
func (j *Job) size() int64 {
	n := int64(len(j.Req.Body) + len(j.Req.Path) + len(j.Req.RawQuery) + len(j.LastError) + 256)
	n += headerSize(j.Req.Header)
	if j.Response != nil {
		n += int64(len(j.Response.Body)) + headerSize(j.Response.Header)
	}
	if j.flat != nil {
		n += j.flat.req.size() + j.flat.resp.size()
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
	u := j.unpacked()
	c := *u
	c.Req.Header = u.Req.Header.Clone()
	c.Req.Body = append([]byte(nil), u.Req.Body...)
	if u.Response != nil {
		r := *u.Response
		r.Header = u.Response.Header.Clone()
		r.Body = append([]byte(nil), u.Response.Body...)
		c.Response = &r
	}
	return c
}

// dedupKey is the key a client's Idempotency-Key is unique under: the
// same key on another route or tenant is another job.
func dedupKey(r *Request) string {
	return r.Route + "\x00" + r.Tenant + "\x00" + r.Key
}
