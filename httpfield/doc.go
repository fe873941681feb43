// Package httpfield parses the HTTP field values Levee's caching rules read
// from outside bytes, strictly, as the RFCs write them: HTTP-dates (RFC 9110
// §5.6.7) and Structured Field dictionaries (RFC 8941 §3.2, for RFC 9213's
// targeted cache control). It is a leaf: stdlib only. A value that does not
// parse is an error, never a guess; the caller decides what an invalid
// field means (for Expires: already stale, RFC 9111 §5.3; for a targeted
// field: absent, RFC 9213 §2.1).
package httpfield
