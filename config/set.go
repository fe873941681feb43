package config

import (
	"reflect"
	"slices"
	"strings"
)

// settableRoot reports whether Set may change keys under the top-level
// block key: everything but routes, which are lists and only make sense in
// a file.
func settableRoot(key string) bool {
	return key == "node" || key == "cluster" || key == "cache"
}

// Set overrides one node, cluster or cache value by its dotted key, e.g.
// Set("node.http", "127.0.0.1:9090"). Values use the file's syntax
// ("15s", "1MiB", "3"); a list such as node.join is comma-separated and ""
// clears it. Setting node.name moves node.data_dir along while it is still
// the default for the old name. An unknown key or an unparsable value is a
// *FieldError; call Validate after the last Set.
func (c *Config) Set(key, value string) error {
	v, ok := settableField(reflect.ValueOf(c).Elem(), key)
	if !ok {
		return &FieldError{Path: key, Msg: "unknown key"}
	}
	oldName := c.Node.Name
	if err := setLeaf(v, value); err != nil {
		return &FieldError{Path: key, Msg: err.Error()}
	}
	if key == "node.name" && c.Node.DataDir == dataDirFor(oldName) {
		c.Node.DataDir = dataDirFor(c.Node.Name)
	}
	return nil
}

// SettableKeys returns, sorted, every key Set accepts.
func SettableKeys() []string {
	var keys []string
	t := reflect.TypeFor[Config]()
	for i := range t.NumField() {
		if key := yamlKey(t.Field(i)); settableRoot(key) {
			keys = appendLeafKeys(keys, key, t.Field(i).Type)
		}
	}
	slices.Sort(keys)
	return keys
}

// appendLeafKeys appends the dotted key of every leaf under t.
func appendLeafKeys(keys []string, prefix string, t reflect.Type) []string {
	if isLeaf(t) {
		return append(keys, prefix)
	}
	for i := range t.NumField() {
		if key := yamlKey(t.Field(i)); key != "" {
			keys = appendLeafKeys(keys, prefix+"."+key, t.Field(i).Type)
		}
	}
	return keys
}

// settableField finds the leaf value named by a dotted key below a
// settable root.
func settableField(v reflect.Value, key string) (reflect.Value, bool) {
	parts := strings.Split(key, ".")
	if !settableRoot(parts[0]) {
		return reflect.Value{}, false
	}
	for _, part := range parts {
		if v.Kind() != reflect.Struct {
			return reflect.Value{}, false
		}
		i, ok := fieldIndex(v.Type())[part]
		if !ok {
			return reflect.Value{}, false
		}
		v = v.Field(i)
	}
	return v, isLeaf(v.Type())
}
