package demoupstream

import (
	"encoding/json"
	"errors"
	"net/http"
)

// Sentinel errors. Every one maps to an HTTP status in errorStatus.
var (
	// ErrBadConfig wraps every Config.Validate failure.
	ErrBadConfig = errors.New("demoupstream: invalid config")
	// ErrBadFault wraps every invalid or undecodable Fault (HTTP 400).
	ErrBadFault = errors.New("invalid fault")
	// ErrBadJob is a POST /api/jobs body that is not a JSON object (400).
	ErrBadJob = errors.New("invalid job")
	// ErrIdempotencyConflict is an Idempotency-Key reused with a different
	// body (422), as payment APIs answer it.
	ErrIdempotencyConflict = errors.New("idempotency key reused with a different body")
	// ErrNotFound is any unknown /api/ path or malformed id (404).
	ErrNotFound = errors.New("not found")
	// ErrClosed is a sleep cut short by Close (503).
	ErrClosed = errors.New("server shutting down")

	// The injected failures; they are errors so that they map to HTTP in
	// the same single place as the real ones.
	errInjectedDown  = errors.New("upstream is down (injected fault)")
	errInjectedError = errors.New("upstream internal error (injected fault)")
	errRateLimited   = errors.New("rate limited (injected fault)")
)

// APIError is the error object in every error body.
type APIError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// errorStatus maps an error to its HTTP status and machine-readable code.
func errorStatus(err error) (int, string) {
	switch {
	case errors.Is(err, ErrBadFault):
		return http.StatusBadRequest, "bad_fault"
	case errors.Is(err, ErrBadJob):
		return http.StatusBadRequest, "bad_job"
	case errors.Is(err, ErrIdempotencyConflict):
		return http.StatusUnprocessableEntity, "idempotency_conflict"
	case errors.Is(err, ErrNotFound):
		return http.StatusNotFound, "not_found"
	case errors.Is(err, ErrClosed), errors.Is(err, errInjectedDown):
		return http.StatusServiceUnavailable, "unavailable"
	case errors.Is(err, errInjectedError):
		return http.StatusInternalServerError, "internal_error"
	case errors.Is(err, errRateLimited):
		return http.StatusTooManyRequests, "rate_limited"
	default:
		return http.StatusInternalServerError, "internal_error"
	}
}

// writeJSON writes v as the JSON body with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		// Only our own types reach here; a failure is a bug worth a 500.
		status, body = http.StatusInternalServerError, []byte(`{"error":{"code":"internal_error","message":"encode"}}`)
	}
	writeBody(w, status, body)
}

// writeBody writes an already encoded JSON body.
func writeBody(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// Two writes, not append: body may be a stored job replayed concurrently.
	_, _ = w.Write(body)
	_, _ = w.Write([]byte{'\n'})
}

// writeAdminError writes an untagged error body for the /-/ endpoints.
func writeAdminError(w http.ResponseWriter, err error) {
	status, code := errorStatus(err)
	writeJSON(w, status, struct {
		Error APIError `json:"error"`
	}{APIError{Code: code, Message: err.Error()}})
}
