package demoupstream

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// maxJobBody bounds a POST /api/jobs body.
const maxJobBody = 64 << 10

// storedJob is the first answer to an Idempotency-Key, replayed verbatim.
type storedJob struct {
	sum  [sha256.Size]byte // of the request body, to catch key reuse
	body []byte
}

// jobStore creates jobs and remembers idempotency keys per tenant.
type jobStore struct {
	mu   sync.Mutex
	seq  map[string]int64 // per tenant
	keys map[tenantKey]storedJob
}

func newJobStore() *jobStore {
	return &jobStore{seq: make(map[string]int64), keys: make(map[tenantKey]storedJob)}
}

// handleJob accepts a JSON object. With an Idempotency-Key the first
// answer (201) is stored and every retry gets it back as a 200.
func (s *Server) handleJob(w http.ResponseWriter, r *http.Request) {
	payload, err := readJobBody(r.Body)
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	body, replayed, err := s.createJob(r, payload)
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	if replayed {
		w.Header().Set(HeaderReplayed, "true")
		writeBody(w, http.StatusOK, body)
		return
	}
	writeBody(w, http.StatusCreated, body)
}

// readJobBody returns the body compacted, or ErrBadJob unless it is one
// JSON object.
func readJobBody(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxJobBody+1))
	if err != nil {
		return nil, fmt.Errorf("%w: read body: %w", ErrBadJob, err)
	}
	if len(data) > maxJobBody {
		return nil, fmt.Errorf("%w: body larger than %d bytes", ErrBadJob, maxJobBody)
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' || !json.Valid(data) {
		return nil, fmt.Errorf("%w: body must be one JSON object", ErrBadJob)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, data); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadJob, err)
	}
	return buf.Bytes(), nil
}

// createJob holds the lock across lookup and creation so two concurrent
// retries with one key create one job.
func (s *Server) createJob(r *http.Request, payload []byte) ([]byte, bool, error) {
	tenant, idem := r.Header.Get(HeaderTenant), r.Header.Get(HeaderIdempotencyKey)
	tk, sum := tenantKey{tenant, idem}, sha256.Sum256(payload)
	js := s.jobs
	js.mu.Lock()
	defer js.mu.Unlock()
	if prev, ok := js.keys[tk]; ok && idem != "" {
		if prev.sum != sum {
			return nil, false, fmt.Errorf("%w: %q", ErrIdempotencyConflict, idem)
		}
		return prev.body, true, nil
	}
	js.seq[tenant]++
	n := js.seq[tenant]
	data, err := json.Marshal(Job{ID: fmt.Sprintf("job-%d", n), Status: "accepted", Payload: payload})
	if err != nil {
		return nil, false, err
	}
	env := s.envelope(r, n)
	env.Data = data
	body, err := json.Marshal(env)
	if err != nil {
		return nil, false, err
	}
	if idem != "" {
		js.keys[tk] = storedJob{sum: sum, body: body}
	}
	return body, false, nil
}
