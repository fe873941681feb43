package api

import (
	crand "crypto/rand"
	"encoding/hex"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
	"unsafe"
)

// Traceable requests: every request through node.http or node.admin
// carries an X-Request-Id (the client's when it sent a sane one, else
// Levee's), which the answer echoes, the upstream receives and every log
// line about the request names; and, when Config.AccessLog says so, one
// JSON line per request.

// maxRequestIDLen bounds a client's X-Request-Id that is kept.
const maxRequestIDLen = 128

// requestIDs makes Levee's request ids: a random per-process prefix and a
// counter, unique and cheap enough for the hit path (no syscall, no fmt,
// one allocation: the id itself).
type requestIDs struct {
	prefix string
	n      atomic.Uint64
}

func newRequestIDs() *requestIDs {
	var b [6]byte
	_, _ = crand.Read(b[:]) // never fails (crypto/rand)
	return &requestIDs{prefix: hex.EncodeToString(b[:]) + "-"}
}

func (g *requestIDs) next() string { return g.nextValues()[0] }

// idValues is a request id and the one-value slice a header holds it in,
// in one allocation: every request without an id of its own pays for it.
type idValues struct {
	v   [1]string
	buf [32]byte // the 13-byte prefix and at most 13 base-36 digits
}

// nextValues is the next id as a header's values, capped at one.
func (g *requestIDs) nextValues() []string {
	iv := new(idValues)
	b := append(iv.buf[:0], g.prefix...)
	b = strconv.AppendUint(b, g.n.Add(1), 36)
	iv.v[0] = unsafe.String(unsafe.SliceData(b), len(b)) // iv.buf's bytes: 32 hold any id
	return iv.v[:1:1]
}

// validRequestID accepts 1–128 visible ASCII characters without spaces or
// quotes: a client's id is echoed in a header and written to logs.
func validRequestID(id string) bool {
	if id == "" || len(id) > maxRequestIDLen {
		return false
	}
	for i := range len(id) {
		if c := id[i]; c <= ' ' || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// traced gives r its request id (set on the request, so the upstream and
// the error log see it, and echoed on the answer), then serves it with h,
// writing the access log line when it is sampled.
func (s *Server) traced(w http.ResponseWriter, r *http.Request, h func(http.ResponseWriter, *http.Request)) {
	ids := r.Header["X-Request-Id"]
	if len(ids) != 1 || !validRequestID(ids[0]) {
		ids = s.ids.nextValues()
		r.Header["X-Request-Id"] = ids
	}
	// The request and its answer share the one value slice (capped, so an
	// Add to either cannot reach the other): nothing changes a header
	// value in place, and the id is this request's alone.
	ids = ids[:1:1]
	id := ids[0]
	w.Header()["X-Request-Id"] = ids
	if s.cfg.AccessLog <= 0 {
		h(w, r)
		return
	}
	rec := &recorder{ResponseWriter: w, status: http.StatusOK}
	start := s.cfg.Now()
	h(rec, r)
	if rec.status < 500 && s.cfg.AccessLog < 1 && rand.Float64() >= s.cfg.AccessLog {
		return // sampled out; every 5xx is logged
	}
	s.cfg.Logger.Info("access", "request_id", id, "method", r.Method, "path", r.URL.Path, "status", rec.status,
		"result", rec.Header().Get("X-Cache"), "owner", rec.Header().Get("X-Levee-Owner"), "bytes", rec.bytes,
		"duration_ms", float64(s.cfg.Now().Sub(start))/float64(time.Millisecond), "remote", r.RemoteAddr)
}

// recorder remembers what an answer's status and size were.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int
}

func (r *recorder) WriteHeader(status int) {
	r.status = status
	r.ResponseWriter.WriteHeader(status)
}

func (r *recorder) Write(b []byte) (int, error) {
	n, err := r.ResponseWriter.Write(b)
	r.bytes += n
	return n, err
}
