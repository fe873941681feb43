package proxy

import (
	"net/http"
	"sync"
)

// Interim answers (RFC 9110 §15.2): a proxy forwards the 1xx answers it
// gets unless it asked for them itself. Levee passes those of the
// upstream call a request makes on to that request's client (102
// Processing, 103 Early Hints), and never stores one nor any of its
// fields: the cached answer is the final one alone. A request that waits
// on another's call, or is answered from the cache, gets none; nor does a
// request forwarded to the key's owner (the owner's node makes the call).

// interimSink writes 1xx answers to one client until EndInterim.
type interimSink struct {
	mu   sync.Mutex
	w    http.ResponseWriter
	done bool
}

// sinkInterim gives raw (on its way to a fetch) the sink its calls write
// 1xx answers through, when its client can take them, and returns it: a
// prepared copy made before shares it by taking it too. Only on the way
// to a fetch: a hit allocates nothing for it.
func sinkInterim(raw *Request) *interimSink {
	if raw.InterimTo != nil && raw.interim == nil {
		raw.interim = &interimSink{w: raw.InterimTo}
	}
	return raw.interim
}

// write sends one 1xx answer with fields h, and takes them out of the
// client's header map again: they belong to that answer only. After
// EndInterim it does nothing: the final answer is being written, or the
// handler is gone.
func (s *interimSink) write(code int, h http.Header) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return
	}
	out := s.w.Header()
	var added []string
	// CleanHeader's rule, as for the final answer (api's write): no
	// hop-by-hop field, none its Connection names, no X-Levee-*.
	named := connectionNamed(h)
	for k, v := range h {
		if _, had := out[k]; !had && !dropped(k, named, true) {
			out[k] = v
			added = append(added, k)
		}
	}
	s.w.WriteHeader(code)
	for _, k := range added {
		delete(out, k)
	}
}

// EndInterim ends r's 1xx answers: api calls it before it writes the
// final answer, from the handler that set r.InterimTo. A call still
// running for r (its client may have gone) writes nothing after it.
func (r *Request) EndInterim() {
	if s := r.interim; s != nil {
		s.mu.Lock()
		s.done = true
		s.mu.Unlock()
	}
}

// interimFunc is the upstream.Request.Interim of a call made for r: nil
// when r has no sink.
func (r *Request) interimFunc() func(int, http.Header) {
	if r.interim == nil {
		return nil
	}
	return r.interim.write
}
