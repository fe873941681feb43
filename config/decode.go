package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Load reads the YAML file at path and parses it with Parse; every error
// names path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// Parse reads one YAML document onto the defaults and validates it. Unknown
// or repeated keys, values of the wrong shape and undecodable values are
// errors naming their key path. A key that is absent, or present with a null
// value, keeps its default.
func Parse(data []byte) (*Config, error) {
	c, d, err := decodeDocument(data)
	if err != nil {
		return nil, err
	}
	if errs := append(d.errs, d.unlessFailed(c.Validate())...); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	c.resolveUpstreams()
	return c, nil
}

// Decode reads one YAML document onto the defaults like Parse, but does not
// validate: cmd/node applies flag and env overrides first (a shared file may
// be incomplete until LEVEE_NODE_ADVERTISE and friends fill it in), then
// calls Validate and Resolve.
func Decode(data []byte) (*Config, error) {
	c, d, err := decodeDocument(data)
	if err != nil {
		return nil, err
	}
	if len(d.errs) > 0 {
		return nil, errors.Join(d.errs...)
	}
	return c, nil
}

// LoadUnvalidated reads path and Decodes it.
func LoadUnvalidated(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	c, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// Resolve sets each route's UpstreamURL; call it after Validate.
func (c *Config) Resolve() { c.resolveUpstreams() }

func decodeDocument(data []byte) (*Config, *decoder, error) {
	root, err := parseDocument(data)
	if err != nil {
		return nil, nil, err
	}
	c := Default()
	d := &decoder{present: map[string]bool{}, merging: map[*yaml.Node]bool{}}
	d.decode("", root, reflect.ValueOf(c).Elem())
	if !d.present["node.data_dir"] {
		c.Node.DataDir = dataDirFor(c.Node.Name)
	}
	return c, d, nil
}

// unlessFailed returns the validation errors not under a key that already
// failed to decode: such a key kept its default, and one error per key is
// enough.
func (d *decoder) unlessFailed(err error) []error {
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return nil // Validate returns nil or a joined error
	}
	var out []error
	for _, e := range joined.Unwrap() {
		var fe *FieldError
		if !errors.As(e, &fe) || !d.failedUnder(fe.Path) {
			out = append(out, e)
		}
	}
	return out
}

// failedUnder reports whether path, or a block containing it, failed to
// decode.
func (d *decoder) failedUnder(path string) bool {
	for _, e := range d.errs {
		var fe *FieldError
		if !errors.As(e, &fe) {
			continue
		}
		if rest, ok := strings.CutPrefix(path, fe.Path); ok && (rest == "" || rest[0] == '.' || rest[0] == '[') {
			return true
		}
	}
	return false
}

// parseDocument returns the root node of the single document in data, or
// nil for an empty document.
func parseDocument(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, &FieldError{Msg: "the file must hold exactly one YAML document"}
	}
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		return doc.Content[0], nil
	}
	return &doc, nil
}

// resolveUpstreams sets each route's UpstreamURL from its validated
// Upstream (see ResolvedUpstream).
func (c *Config) resolveUpstreams() {
	for i := range c.Routes {
		if u, err := c.Routes[i].ResolvedUpstream(); err == nil {
			c.Routes[i].UpstreamURL = u // errors: Validate has reported them
		}
	}
}

// ResolvedUpstream returns UpstreamURL or, on a Route built in code (nil
// UpstreamURL), Upstream parsed as Resolve does: an absolute http(s) URL
// whose path ends in "/", so that joining the rest of a request path never
// glues two segments together. It is the one place that rule lives.
func (r *Route) ResolvedUpstream() (*url.URL, error) {
	if r.UpstreamURL != nil {
		return r.UpstreamURL, nil
	}
	u, err := parseUpstream(r.Upstream)
	if err != nil {
		return nil, &FieldError{Path: "upstream", Msg: fmt.Sprintf("%q %v", r.Upstream, err)}
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
		if u.RawPath != "" {
			u.RawPath += "/"
		}
	}
	return u, nil
}
