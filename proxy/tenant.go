package proxy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
)

// Tenants. A route partitions its cache by tenant in one of two modes:
//
//   - header mode (TenantHeader): the tenant is the header's value. Anyone
//     who can send the header can name any tenant, so it fits when the app
//     servers in front of Levee set it from their own session and clients
//     never reach Levee directly.
//   - credential mode (TenantKeyHeader + TenantKeys): the tenant is looked
//     up by the SHA-256 of an API key the request carries, so a request
//     reaches a tenant's partition only with one of that tenant's keys. It
//     fits when callers Levee cannot trust share it.

// maxTenantLen bounds a tenant named in a header.
const maxTenantLen = 256

// resolveTenant returns r's tenant ("" for none) or why the request is
// refused: more than one value of the tenant (or tenant key) header, a
// tenant that is not printable text, or none when the route requires one.
func resolveTenant(rt *Route, h http.Header) (string, error) {
	var tenant string
	var err error
	switch {
	case rt.TenantKeyHeader != "":
		tenant, err = tenantFromKey(rt, h)
	case rt.TenantHeader != "":
		tenant, err = tenantFromValues(rt.TenantHeader, rt.values(rt.TenantHeader, h))
	}
	if err == nil && tenant == "" && rt.TenantRequired {
		err = fmt.Errorf("%w: this route requires a tenant", ErrBadRequest)
	}
	return tenant, err
}

// Tenant is the tenant a request with headers h belongs to on rt ("" for
// none), or why rt refuses it (an error wrapping ErrBadRequest). It is the
// one rule for every part of Levee that keeps tenants apart: the cache's
// partitions here, and the job queue's (api), which must not tell tenants
// apart any other way.
func (rt *Route) Tenant(h http.Header) (string, error) { return resolveTenant(rt, h) }

// tenantOf is resolveTenant for a request prepare has accepted.
func tenantOf(rt *Route, h http.Header) string {
	if rt == nil {
		return ""
	}
	t, _ := resolveTenant(rt, h)
	return t
}

// tenantFromHeader reads header mode's one value. A comma counts as two
// values: an intermediary folds repeated header lines into one that way
// (RFC 9110 §5.3), and "acme,globex" must not become a third tenant.
func tenantFromHeader(name string, h http.Header) (string, error) {
	return tenantFromValues(name, h.Values(name))
}

// tenantFromValues is tenantFromHeader given the header's values.
func tenantFromValues(name string, vs []string) (string, error) {
	v, err := oneValue(name, vs)
	switch {
	case err != nil:
		return "", err
	case strings.Contains(v, ","):
		return "", fmt.Errorf("%w: more than one %s value", ErrBadRequest, name)
	case len(v) > maxTenantLen:
		return "", fmt.Errorf("%w: %s longer than %d bytes", ErrBadRequest, name, maxTenantLen)
	case strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return "", fmt.Errorf("%w: control character in %s", ErrBadRequest, name)
	}
	return v, nil
}

// tenantFromKey maps the credential's hash to its tenant; an unknown or
// absent key is no tenant.
func tenantFromKey(rt *Route, h http.Header) (string, error) {
	v, err := oneValue(rt.TenantKeyHeader, rt.values(rt.TenantKeyHeader, h))
	if err != nil || v == "" {
		return "", err
	}
	return rt.TenantKeys[KeyHash(v)], nil
}

// values is h.Values(name) for one of rt's header names.
func (rt *Route) values(name string, h http.Header) []string {
	if rt.canonical {
		return h[name]
	}
	return h.Values(name)
}

// oneValue returns the only value of vs, header name's values; "" when
// it has none.
func oneValue(name string, vs []string) (string, error) {
	switch len(vs) {
	case 0:
		return "", nil
	case 1:
		return vs[0], nil
	}
	return "", fmt.Errorf("%w: more than one %s value", ErrBadRequest, name)
}

// KeyHash is how a credential is written in a route's tenant_keys: the
// lower-case hex SHA-256 of the header's whole value, e.g. of
// "Bearer s3cr3t" for Authorization. Levee never stores the key itself.
func KeyHash(v string) string {
	sum := sha256.Sum256([]byte(v))
	return hex.EncodeToString(sum[:])
}
