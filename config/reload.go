package config

import (
	"fmt"
	"reflect"
	"strings"
)

// What a running node takes from a new file without a restart (SIGHUP,
// POST /-/reload): each route's cache windows, breaker and retry settings,
// the hosts' caps (hosts:, upstream.max_inflight), cluster.admin_token and
// node.log_level. Everything else (the node's identity and addresses, the
// cluster's, the set of routes and what they call, the cache, the queue)
// needs a restart.

// RestartNeeded lists the keys that differ between old and next that a
// reload cannot apply, sorted as the file reads; none when next may
// replace old at once. Both must be valid.
func RestartNeeded(old, next *Config) []string {
	fixed := *next
	fixed.Hosts = old.Hosts
	fixed.Upstream.MaxInflight = old.Upstream.MaxInflight
	fixed.Cluster.AdminToken = old.Cluster.AdminToken
	fixed.Node.LogLevel = old.Node.LogLevel
	if len(next.Routes) == len(old.Routes) {
		fixed.Routes = append([]Route(nil), next.Routes...)
		for i := range fixed.Routes {
			fixed.Routes[i].Cache, fixed.Routes[i].Breaker, fixed.Routes[i].Retry = old.Routes[i].Cache, old.Routes[i].Breaker, old.Routes[i].Retry
			fixed.Routes[i].UpstreamURL = old.Routes[i].UpstreamURL
		}
	}
	var out []string
	diffKeys("", reflect.ValueOf(*old), reflect.ValueOf(fixed), &out)
	return out
}

// diffKeys appends the yaml key paths under path where a and b differ:
// structs are walked field by field, a list of structs element by element
// when the lengths agree; anything else is compared whole.
func diffKeys(path string, a, b reflect.Value, out *[]string) {
	switch {
	case a.Kind() == reflect.Struct && !isLeaf(a.Type()):
		for i := range a.NumField() {
			f := a.Type().Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "-" || !f.IsExported() {
				continue
			}
			diffKeys(joinKey(path, name), a.Field(i), b.Field(i), out)
		}
	case a.Kind() == reflect.Slice && a.Type().Elem().Kind() == reflect.Struct && a.Len() == b.Len():
		for i := range a.Len() {
			diffKeys(fmt.Sprintf("%s[%d]", path, i), a.Index(i), b.Index(i), out)
		}
	case !reflect.DeepEqual(a.Interface(), b.Interface()):
		*out = append(*out, path)
	}
}

func joinKey(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}
