package proxy

import (
	"net/http"
	"slices"
)

// Credentials. A request carrying one asks for an answer that may be meant
// for its caller alone. RFC 9111 §3.5 lets a shared cache store an answer
// to an authenticated request only when the upstream says so; Levee holds
// every credential header to that rule, not only Authorization, unless the
// route keys the cache by that header (each caller then has its own entry).

// defaultCredentials identify a caller on every route.
var defaultCredentials = []string{"Authorization", "Cookie"}

// credentialNames lists the headers that identify a caller on rt.
func credentialNames(rt *Route) []string {
	names := append(slices.Clone(defaultCredentials), rt.CredentialHeaders...)
	if rt.TenantKeyHeader != "" {
		names = append(names, rt.TenantKeyHeader)
	}
	return names
}

// keyedCredential reports whether the cache key holds credential name for
// a request with headers h: a key header, or the tenant key when it names a
// tenant (the entry is then the tenant's, shared by its keys only).
func keyedCredential(rt *Route, name string, h http.Header) bool {
	if slices.Contains(rt.KeyHeaders, name) {
		return true
	}
	return name == rt.TenantKeyHeader && tenantOf(rt, h) != ""
}

// unkeyedCredential reports whether h carries a credential the cache key
// does not hold.
func unkeyedCredential(rt *Route, h http.Header) bool {
	for _, n := range credentialNames(rt) {
		if len(h.Values(n)) > 0 && !keyedCredential(rt, n, h) {
			return true
		}
	}
	return false
}

// withoutUnkeyedCredentials returns a copy of h without the credentials
// the key does not hold. A background refresh renews an entry every caller
// of the key shares; it must not run with the credentials of the one
// caller who happened to find it stale.
func withoutUnkeyedCredentials(rt *Route, h http.Header) http.Header {
	out := h.Clone()
	for _, n := range credentialNames(rt) {
		if !keyedCredential(rt, n, h) {
			out.Del(n)
		}
	}
	return out
}

// flightKey separates callers that should not wait on one another's fetch:
// requests carrying different credentials do not coalesce. Correctness does
// not depend on it (a waiter only ever gets an answer it may reuse, see
// flight.reusableFor); it keeps one user's burst of private answers from
// queueing everyone else's requests behind it.
func flightKey(rt *Route, key string, h http.Header) string {
	var vals []string
	for _, n := range credentialNames(rt) {
		for _, v := range h.Values(n) {
			vals = append(vals, n+"\x00"+v)
		}
	}
	if len(vals) == 0 {
		return key
	}
	return key + "\x00cred=" + valuesDigest(vals)
}
