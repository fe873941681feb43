package main

import (
	"errors"
	"flag"
	"fmt"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"
)

const checkUsage = `usage: levee check [-config FILE] [-node.http HOST:PORT ...]

Loads FILE (default $LEVEE_CONFIG) exactly as a node does at start: the
file, then LEVEE_<KEY> environment overrides, then flags named after keys
(-node.http ...), then validation. Prints the effective config, every
default filled in, as YAML, with each credential (cluster.secret,
cluster.trusted_secrets, cluster.admin_token) shown as "***". File paths
(cluster.tls.key, a route's tls.ca_file) are shown: they name key
material, they are not it. Nothing is listened on or written.

Exit codes: 0 valid, 1 the config could not be printed, 2 invalid (the
reason is printed) or a usage error.
`

// checkCmd is `levee check`: the node's own config path, then a print.
func checkCmd(args []string, e cliEnv) int {
	fs := flag.NewFlagSet("levee check", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() { fmt.Fprint(e.stderr, checkUsage) }
	cfg, err := loadConfigWith(fs, args, e.getenv, nil)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "levee check: %v\n", err)
		return exitUsage
	}
	maskSecrets(reflect.ValueOf(cfg).Elem())
	out, err := yaml.Marshal(cfg)
	if err != nil {
		fmt.Fprintf(e.stderr, "levee check: %v\n", err)
		return exitAnswered
	}
	fmt.Fprintf(e.stdout, "# %s is valid. Effective config: defaults filled in, credentials masked.\n%s",
		fs.Lookup("config").Value, out)
	return exitOK
}

// masked replaces a credential that is set; an unset one stays empty, so
// the print still says whether it is.
const masked = "***"

// isSecretKey reports whether a config key holds a credential: the
// secret, the trusted secrets, the admin token, and any key named so
// later. legacy_gossip_key is a switch, tls.key a path: neither is.
func isSecretKey(key string) bool {
	for _, word := range []string{"secret", "secrets", "token", "password"} {
		if key == word || strings.HasSuffix(key, "_"+word) {
			return true
		}
	}
	return false
}

// maskSecrets replaces, in place, every string (or list of strings) under
// a credential's key in v, a config struct, with masked.
func maskSecrets(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			switch {
			case !f.IsExported() || key == "-":
			case isSecretKey(key):
				maskValue(v.Field(i))
			default:
				maskSecrets(v.Field(i))
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			maskSecrets(v.Index(i))
		}
	case reflect.Map:
		// Map values are not addressable: mask a copy and put it back.
		for _, k := range v.MapKeys() {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			maskSecrets(e)
			v.SetMapIndex(k, e)
		}
	}
}

func maskValue(v reflect.Value) {
	switch {
	case v.Kind() == reflect.String && v.Len() > 0:
		v.SetString(masked)
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.String:
		for i := range v.Len() {
			maskValue(v.Index(i))
		}
	}
}
