package config

import (
	"fmt"
	"slices"
	"strings"
)

// Route rules about request headers: tenants, credentials, key headers
// and the route's deny and allow lists. Header names compare as HTTP does,
// ignoring case.

// maxTenantName bounds a tenant name, as the proxy bounds a tenant header.
const maxTenantName = 256

func (v *validator) tenant(p string, r *Route) {
	v.headerName(p+".tenant_header", r.TenantHeader)
	v.headerName(p+".tenant_key_header", r.TenantKeyHeader)
	switch {
	case r.TenantHeader != "" && r.TenantKeyHeader != "":
		v.add(p+".tenant_key_header", "set either tenant_header (tenant named by the client) or tenant_key_header (tenant from an API key), not both")
	case r.TenantKeyHeader != "" && len(r.TenantKeys) == 0:
		v.add(p+".tenant_keys", "is required with tenant_key_header (hex SHA-256 of a key: tenant)")
	case r.TenantKeyHeader == "" && len(r.TenantKeys) > 0:
		v.add(p+".tenant_keys", "needs tenant_key_header, the header that carries the keys")
	case r.TenantRequired && r.TenantHeader == "" && r.TenantKeyHeader == "":
		v.add(p+".tenant_required", "needs tenant_header or tenant_key_header")
	}
	v.tenantKeys(p+".tenant_keys", r.TenantKeys)
}

// tenantKeys checks each key is a SHA-256 in hex, no two keys are the same
// hash written in another case, and every tenant is a usable name.
func (v *validator) tenantKeys(p string, keys map[string]string) {
	seen := map[string]string{}
	for _, k := range sortedKeys(keys) {
		sub := p + "." + k
		if len(k) != 64 || strings.Trim(strings.ToLower(k), "0123456789abcdef") != "" {
			v.add(sub, "must be the 64 hex digits of a SHA-256, e.g. from: printf %%s \"$KEY\" | sha256sum")
		}
		if other, dup := seen[strings.ToLower(k)]; dup {
			v.add(sub, "is the same hash as %s", other)
		}
		seen[strings.ToLower(k)] = k
		name := keys[k]
		if name == "" || len(name) > maxTenantName || strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			v.add(sub, "tenant %q must be 1 to %d printable characters", name, maxTenantName)
		}
	}
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func (v *validator) headerName(p, name string) {
	v.check(name == "" || validHeaderName(name), p, fmt.Sprintf("%q is not a valid header name", name))
}

func (v *validator) headerNames(p string, names []string) {
	for i, n := range names {
		v.check(validHeaderName(n), fmt.Sprintf("%s[%d]", p, i), fmt.Sprintf("%q is not a valid header name", n))
	}
}

// requestHeaders checks the deny and allow lists. Whether an allowed
// header is one Levee drops by default is the proxy's rule, checked when
// the engine starts.
func (v *validator) requestHeaders(p string, r *Route) {
	v.headerNames(p+".deny", r.RequestHeaders.Deny)
	v.headerNames(p+".allow", r.RequestHeaders.Allow)
	keyed := append([]string{r.TenantHeader, r.TenantKeyHeader}, r.KeyHeaders...)
	for i, n := range r.RequestHeaders.Deny {
		if n != "" && slices.ContainsFunc(keyed, func(k string) bool { return strings.EqualFold(k, n) }) {
			v.add(fmt.Sprintf("%s.deny[%d]", p, i), "%q is part of the cache key (tenant or key header); it cannot be denied", n)
		}
		if slices.ContainsFunc(r.RequestHeaders.Allow, func(a string) bool { return strings.EqualFold(a, n) }) {
			v.add(fmt.Sprintf("%s.deny[%d]", p, i), "%q is also in allow", n)
		}
	}
}
