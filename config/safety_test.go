package config

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// hashA and hashB are SHA-256 digests in the form tenant_keys takes.
const (
	hashA = "6b86b273ff34fce19d6b804eff5a3f5747ada4eaa22f1d49c01e52ddb7875b4b"
	hashB = "D4735E3A265E16EEE03F59718B9B5D03019C07D8B6C51F90DA3A666EEC13AB35"
)

const safetyYAML = `
routes:
  - name: comments
    prefix: /comments/
    upstream: http://127.0.0.1:9000/api/
    tenant_key_header: X-Api-Key
    tenant_keys:
      ` + hashA + `: acme
      ` + hashB + `: globex
    tenant_required: true
    credential_headers: [X-Session]
    key_headers: [Accept-Language]
    request_headers: {deny: [X-Debug], allow: [X-HTTP-Method-Override]}
    cache: {hit_for_miss: 2s}
`

func TestParseSafetyKeys(t *testing.T) {
	want := referenceRoute("comments", "/comments/", "http://127.0.0.1:9000/api/")
	want.TenantKeyHeader = "X-Api-Key"
	want.TenantKeys = map[string]string{hashA: "acme", hashB: "globex"}
	want.TenantRequired = true
	want.CredentialHeaders = []string{"X-Session"}
	want.KeyHeaders = []string{"Accept-Language"}
	want.RequestHeaders = RouteRequestHeaders{Deny: []string{"X-Debug"}, Allow: []string{"X-HTTP-Method-Override"}}
	want.Cache.HitForMiss = Duration(2 * time.Second)
	c := mustParse(t, safetyYAML)
	if got := withoutURLs(*c).Routes[0]; !reflect.DeepEqual(got, want) {
		t.Fatalf("route =\n%+v\nwant\n%+v", got, want)
	}
	out, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if back := mustParse(t, string(out)); !reflect.DeepEqual(back, c) {
		t.Fatalf("round trip changed the config:\n%s", out)
	}
}

func TestSafetyKeyDefaults(t *testing.T) {
	r := mustParse(t, minimalYAML).Routes[0]
	if r.TenantKeyHeader != "" || r.TenantKeys != nil || r.TenantRequired || r.CredentialHeaders != nil ||
		r.KeyHeaders != nil || r.RequestHeaders.Deny != nil || r.RequestHeaders.Allow != nil {
		t.Fatalf("a minimal route has safety keys set: %+v", r)
	}
	if r.Cache.HitForMiss != Duration(5*time.Second) {
		t.Fatalf("hit_for_miss default = %v, want 5s", r.Cache.HitForMiss)
	}
	if r := mustParse(t, oneRoute("tenant_keys: {}")).Routes[0]; r.TenantKeys != nil {
		t.Fatalf("an empty tenant_keys is %#v, want nil like an absent one", r.TenantKeys)
	}
}

func TestParseInvalidSafetyKeys(t *testing.T) {
	keyRoute := func(extra string) string {
		return oneRoute("tenant_key_header: X-Api-Key\n    " + extra)
	}
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{"both tenant modes", oneRoute("tenant_header: X-Tenant\n    tenant_key_header: X-Api-Key\n    tenant_keys: {" + hashA + ": a}"),
			[]string{"routes[0].tenant_key_header: set either tenant_header"}},
		{"key header without keys", oneRoute("tenant_key_header: X-Api-Key"), []string{"routes[0].tenant_keys: is required"}},
		{"keys without key header", oneRoute("tenant_keys: {" + hashA + ": a}"), []string{"routes[0].tenant_keys: needs tenant_key_header"}},
		{"required without tenant", oneRoute("tenant_required: true"), []string{"routes[0].tenant_required: needs tenant_header"}},
		{"key not a hash", keyRoute("tenant_keys: {s3cr3t: a}"), []string{"routes[0].tenant_keys.s3cr3t: must be the 64 hex digits"}},
		{"same hash twice", keyRoute("tenant_keys: {" + hashA + ": a, " + strings.ToUpper(hashA) + ": b}"), []string{"is the same hash as"}},
		{"duplicate key", keyRoute("tenant_keys: {" + hashA + ": a, " + hashA + ": b}"), []string{"routes[0].tenant_keys." + hashA + ": duplicate key"}},
		{"empty tenant", keyRoute("tenant_keys: {" + hashA + ": ''}"), []string{`tenant "" must be 1 to 256`}},
		{"tenant not a string", keyRoute("tenant_keys: {" + hashA + ": [a]}"), []string{"routes[0].tenant_keys." + hashA + ": must be a string"}},
		{"tenant_keys not a mapping", keyRoute("tenant_keys: [a]"), []string{"routes[0].tenant_keys: must be a mapping"}},
		{"bad tenant key header", oneRoute("tenant_key_header: 'X Key'"), []string{`routes[0].tenant_key_header: "X Key" is not a valid header name`}},
		{"bad credential header", oneRoute("credential_headers: ['a b']"), []string{`routes[0].credential_headers[0]: "a b" is not a valid header name`}},
		{"bad key header", oneRoute("key_headers: ['']"), []string{`routes[0].key_headers[0]: "" is not a valid header name`}},
		{"bad deny header", oneRoute("request_headers: {deny: ['x:y']}"), []string{`routes[0].request_headers.deny[0]: "x:y" is not a valid header name`}},
		{"deny the tenant header", oneRoute("tenant_header: X-Tenant\n    request_headers: {deny: [x-tenant]}"), []string{"routes[0].request_headers.deny[0]: \"x-tenant\" is part of the cache key"}},
		{"deny a key header", oneRoute("key_headers: [Accept]\n    request_headers: {deny: [Accept]}"), []string{"part of the cache key"}},
		{"deny and allow", oneRoute("request_headers: {deny: [X-Original-URL], allow: [x-original-url]}"), []string{"is also in allow"}},
		{"unknown request_headers key", oneRoute("request_headers: {drop: [a]}"), []string{"routes[0].request_headers.drop: unknown key"}},
		{"negative hit_for_miss", oneRoute("cache: {hit_for_miss: -1s}"), []string{"routes[0].cache.hit_for_miss: must be >= 0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.src))
			if err == nil {
				t.Fatalf("Parse accepted:\n%s", tt.src)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}
