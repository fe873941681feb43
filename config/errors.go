package config

import "errors"

// ErrInvalid is wrapped by every error that reports a bad configuration, so
// callers can tell a bad file from an I/O failure with errors.Is.
var ErrInvalid = errors.New("invalid config")

// FieldError is one problem tied to one key of the configuration.
type FieldError struct {
	// Path is the dotted key path, e.g. "routes[0].cache.fresh"; empty for
	// a problem with the document as a whole.
	Path string
	// Msg says what is wrong, e.g. "must be > 0".
	Msg string
}

// Error returns "path: msg".
func (e *FieldError) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

// Unwrap returns ErrInvalid.
func (e *FieldError) Unwrap() error { return ErrInvalid }
