package config

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// maxDecodeSteps bounds the nodes and keys one Parse may visit, so that
// aliases and merge keys cannot blow a small file up into a huge walk. A
// route with every key set takes about 60 steps, so this allows over 1,500
// such routes.
const maxDecodeSteps = 100_000

// maxAliasHops bounds alias-to-alias chains while resolving one node.
const maxAliasHops = 64

// decoder walks a YAML node tree onto a Go value whose fields already hold
// defaults. It drives the walk by the Go type, not the YAML, so every YAML
// key is checked against the struct's yaml tags; yaml.v3's KnownFields
// would not reach inside values decoded by custom unmarshalers.
type decoder struct {
	errs    []error
	steps   int
	present map[string]bool     // key paths seen, for derived defaults
	merging map[*yaml.Node]bool // mappings being merged, to stop cycles
}

func (d *decoder) fail(path, format string, args ...any) {
	d.errs = append(d.errs, &FieldError{Path: displayPath(path), Msg: fmt.Sprintf(format, args...)})
}

// displayPath names the document root, whose path is empty.
func displayPath(path string) string {
	if path == "" {
		return "(root)"
	}
	return path
}

// decode stores n into v, reporting problems under path.
func (d *decoder) decode(path string, n *yaml.Node, v reflect.Value) {
	if !d.spend(path) {
		return
	}
	n = resolve(n)
	if n == nil || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null") {
		return
	}
	d.present[path] = true
	switch {
	case isLeaf(v.Type()):
		d.scalar(path, n, v)
	case v.Kind() == reflect.Struct:
		d.mapping(path, n, v)
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Struct:
		d.structList(path, n, v)
	case v.Type() == reflect.TypeFor[map[string]string]():
		d.stringMap(path, n, v)
	case v.Kind() == reflect.Map && v.Type().Key().Kind() == reflect.String && v.Type().Elem().Kind() == reflect.Struct:
		d.structMap(path, n, v)
	default:
		d.fail(path, "unsupported field type %s", v.Type()) // a bug in this package
	}
}

// spend counts one step of work and reports whether the budget allows it;
// the first step over budget is reported as an error under path.
func (d *decoder) spend(path string) bool {
	d.steps++
	if d.steps == maxDecodeSteps+1 {
		d.fail(path, "document too complex (too many aliases or merges)")
	}
	return d.steps <= maxDecodeSteps
}

// resolve follows aliases to the node they name.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode; i++ {
		if i == maxAliasHops {
			return nil
		}
		n = n.Alias
	}
	return n
}

// isLeaf reports whether t is set from one scalar (or, for []string, from a
// list of scalars) rather than walked field by field.
func isLeaf(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.String, reflect.Int, reflect.Int64, reflect.Float64, reflect.Bool:
		return true
	case reflect.Slice:
		return t.Elem().Kind() == reflect.String
	}
	return false
}

// mapping decodes a YAML mapping onto the struct v. Merge keys ("<<") are
// applied first so that the mapping's own keys win, as YAML specifies; unlike
// YAML, a nested block present in both is merged key by key, not replaced.
func (d *decoder) mapping(path string, n *yaml.Node, v reflect.Value) {
	if n.Kind != yaml.MappingNode {
		d.fail(path, "must be a mapping, not %s", describe(n))
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := resolve(n.Content[i]); k != nil && k.ShortTag() == "!!merge" {
			d.merge(path, n.Content[i+1], v)
		}
	}
	fields := fieldIndex(v.Type())
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := resolve(n.Content[i])
		if k != nil && k.ShortTag() == "!!merge" {
			continue
		}
		d.field(path, k, n.Content[i+1], v, fields, seen)
	}
}

// field decodes one key: value pair of a mapping onto the struct v.
func (d *decoder) field(path string, k, val *yaml.Node, v reflect.Value, fields map[string]int, seen map[string]bool) {
	if !d.spend(path) {
		return
	}
	if k == nil || k.Kind != yaml.ScalarNode {
		d.fail(path, "mapping keys must be plain strings")
		return
	}
	sub := joinPath(path, k.Value)
	idx, ok := fields[k.Value]
	switch {
	case !ok:
		d.fail(sub, "unknown key")
	case seen[k.Value]:
		d.fail(sub, "duplicate key")
	default:
		seen[k.Value] = true
		d.decode(sub, val, v.Field(idx))
	}
}

// merge applies the value of a merge key: a mapping, or a list of mappings
// of which earlier ones win.
func (d *decoder) merge(path string, val *yaml.Node, v reflect.Value) {
	val = resolve(val)
	if val == nil {
		return
	}
	if val.Kind != yaml.SequenceNode {
		d.mergeOne(path, val, v)
		return
	}
	for i := len(val.Content) - 1; i >= 0; i-- {
		// Not d.merge: a list nested in the list, possibly itself through
		// an alias, would recurse without end.
		d.mergeOne(path, resolve(val.Content[i]), v)
	}
}

// mergeOne applies one mapping named by a merge key.
func (d *decoder) mergeOne(path string, m *yaml.Node, v reflect.Value) {
	switch {
	case m == nil:
		return
	case m.Kind != yaml.MappingNode:
		d.fail(path, "a merge key (<<) needs a mapping or a list of mappings")
	case d.merging[m]:
		d.fail(path, "merge key refers to the mapping that contains it")
	default:
		d.merging[m] = true
		d.decode(path, m, v)
		delete(d.merging, m)
	}
}

// structList decodes a YAML sequence into a slice of structs, each element
// starting from its defaults.
func (d *decoder) structList(path string, n *yaml.Node, v reflect.Value) {
	if n.Kind != yaml.SequenceNode {
		d.fail(path, "must be a list, not %s", describe(n))
		return
	}
	out := reflect.MakeSlice(v.Type(), 0, len(n.Content))
	for i, el := range n.Content {
		item := defaultsOf(v.Type().Elem())
		d.decode(fmt.Sprintf("%s[%d]", path, i), el, item)
		out = reflect.Append(out, item)
	}
	v.Set(out)
}

// scalar decodes a leaf value: one scalar, or a list of scalars for []string.
func (d *decoder) scalar(path string, n *yaml.Node, v reflect.Value) {
	if v.Kind() == reflect.Slice && n.Kind == yaml.SequenceNode {
		d.stringList(path, n, v)
		return
	}
	if n.Kind != yaml.ScalarNode {
		d.fail(path, "must be a single value, not %s", describe(n))
		return
	}
	if err := setLeaf(v, n.Value); err != nil {
		d.fail(path, "%v", err)
	}
}

// stringList decodes a sequence of scalars into a []string; an empty list
// is stored as nil, the same as an absent one.
func (d *decoder) stringList(path string, n *yaml.Node, v reflect.Value) {
	var out []string
	for i, el := range n.Content {
		el = resolve(el)
		if el == nil || el.Kind != yaml.ScalarNode || el.ShortTag() == "!!null" {
			d.fail(fmt.Sprintf("%s[%d]", path, i), "must be a string")
			continue
		}
		out = append(out, el.Value)
	}
	v.Set(reflect.ValueOf(out))
}

// stringMap decodes a mapping of scalars into a map[string]string. Unlike
// a struct's mapping it takes any key, but not merge keys: a table of
// secrets is written out, not assembled. An empty mapping is stored as
// nil, the same as an absent one.
func (d *decoder) stringMap(path string, n *yaml.Node, v reflect.Value) {
	if n.Kind != yaml.MappingNode {
		d.fail(path, "must be a mapping, not %s", describe(n))
		return
	}
	out := map[string]string{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if !d.spend(path) {
			return
		}
		k, val := resolve(n.Content[i]), resolve(n.Content[i+1])
		switch {
		case k == nil || k.Kind != yaml.ScalarNode || k.ShortTag() == "!!merge":
			d.fail(path, "mapping keys must be plain strings")
		case val == nil || val.Kind != yaml.ScalarNode || val.ShortTag() == "!!null":
			d.fail(joinPath(path, k.Value), "must be a string")
		case hasKey(out, k.Value):
			d.fail(joinPath(path, k.Value), "duplicate key")
		default:
			out[k.Value] = val.Value
		}
	}
	if len(out) == 0 {
		out = nil
	}
	v.Set(reflect.ValueOf(out))
}

// structMap decodes a mapping whose keys are free-form (hosts: is keyed
// by origin) into a map of structs, each value starting from its
// defaults. Like stringMap it takes no merge keys at its own level; the
// values may use them. A value's path is the map's with the key quoted,
// hosts["https://api.example.com"], since keys hold dots. An empty
// mapping is stored as nil, the same as an absent one.
func (d *decoder) structMap(path string, n *yaml.Node, v reflect.Value) {
	if n.Kind != yaml.MappingNode {
		d.fail(path, "must be a mapping, not %s", describe(n))
		return
	}
	out := reflect.MakeMap(v.Type())
	for i := 0; i+1 < len(n.Content); i += 2 {
		if !d.spend(path) {
			return
		}
		k := resolve(n.Content[i])
		if k == nil || k.Kind != yaml.ScalarNode || k.ShortTag() == "!!merge" {
			d.fail(path, "mapping keys must be plain strings")
			continue
		}
		sub, key := fmt.Sprintf("%s[%q]", path, k.Value), reflect.ValueOf(k.Value).Convert(v.Type().Key())
		if out.MapIndex(key).IsValid() {
			d.fail(sub, "duplicate key")
			continue
		}
		item := defaultsOf(v.Type().Elem())
		d.decode(sub, n.Content[i+1], item)
		out.SetMapIndex(key, item)
	}
	if out.Len() == 0 {
		out = reflect.Zero(v.Type())
	}
	v.Set(out)
}

// defaultsOf returns a new value of t holding its defaults: a route starts
// from DefaultRoute, a host from DefaultHostLimits, anything else from
// its zero value.
func defaultsOf(t reflect.Type) reflect.Value {
	item := reflect.New(t).Elem()
	switch t {
	case reflect.TypeFor[Route]():
		item.Set(reflect.ValueOf(DefaultRoute()))
	case reflect.TypeFor[HostLimits]():
		item.Set(reflect.ValueOf(DefaultHostLimits()))
	}
	return item
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}

// setLeaf parses s into the leaf value v. It serves both the YAML decoder
// and Set, so a flag and a file accept the same text.
func setLeaf(v reflect.Value, s string) error {
	switch v.Type() {
	case reflect.TypeFor[Duration]():
		d, err := ParseDuration(s)
		if err == nil {
			v.Set(reflect.ValueOf(d))
		}
		return err
	case reflect.TypeFor[ByteSize]():
		b, err := ParseByteSize(s)
		if err == nil {
			v.Set(reflect.ValueOf(b))
		}
		return err
	}
	return setBasic(v, s)
}

// setBasic parses s into a string, bool, int, float64 or []string value.
func setBasic(v reflect.Value, s string) error {
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("invalid boolean %q (true or false)", s)
		}
		v.SetBool(b)
	case reflect.Int:
		n, err := strconv.ParseInt(s, 10, strconv.IntSize)
		if err != nil {
			return fmt.Errorf("invalid integer %q", s)
		}
		v.SetInt(n)
	case reflect.Float64:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("invalid number %q", s)
		}
		v.SetFloat(f)
	case reflect.Slice:
		v.Set(reflect.ValueOf(splitList(s)))
	default:
		return fmt.Errorf("unsupported field type %s", v.Type()) // a bug in this package
	}
	return nil
}

// splitList splits a comma-separated list, dropping blanks; an empty list
// is nil.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// fieldIndex maps the yaml key of each of t's fields to its index.
func fieldIndex(t reflect.Type) map[string]int {
	out := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		if key := yamlKey(t.Field(i)); key != "" {
			out[key] = i
		}
	}
	return out
}

// yamlKey is the key of field f in YAML, or "" when f is not in YAML.
func yamlKey(f reflect.StructField) string {
	key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if !f.IsExported() || key == "-" {
		return ""
	}
	return key
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// describe names the kind of n for error messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	default:
		return fmt.Sprintf("the value %q", n.Value)
	}
}
