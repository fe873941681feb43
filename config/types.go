package config

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Duration is a time.Duration written in YAML as Go duration text:
// "150ms", "15s", "10m", "2h", "1h30m". A bare number is rejected (except
// "0") because "15" could mean seconds or nanoseconds.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String returns d in time.Duration's format, which ParseDuration reads back.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalYAML writes d as duration text.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// UnmarshalYAML reads duration text from a scalar node.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return errors.New("duration must be a scalar")
	}
	v, err := ParseDuration(n.Value)
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// ParseDuration parses Go duration text ("150ms", "15s", "10m", "2h").
func ParseDuration(s string) (Duration, error) {
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q (want e.g. 150ms, 15s, 10m, 2h)", s)
	}
	return Duration(v), nil
}

// ByteSize is a size in bytes written in YAML as an integer with an optional
// unit: "4096", "512KiB", "1MiB", "256MiB", "10MB". Binary units (KiB, MiB,
// GiB, TiB) are powers of 1024, decimal ones (KB, MB, GB, TB) powers of
// 1000; units are case-insensitive and follow the number without a space.
type ByteSize int64

// Int64 returns b as a plain number of bytes.
func (b ByteSize) Int64() int64 { return int64(b) }

// byteUnits lists units from largest to smallest so String picks the largest
// exact one; binary units come first because sizes are usually powers of 2.
var byteUnits = [...]struct {
	name string
	mult int64
}{
	{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
	{"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"B", 1},
}

// String returns b with the largest unit that divides it exactly, e.g.
// "256MiB", "10MB", "4097B"; ParseByteSize reads it back.
func (b ByteSize) String() string {
	if b == 0 {
		return "0"
	}
	for _, u := range byteUnits {
		if int64(b)%u.mult == 0 {
			return strconv.FormatInt(int64(b)/u.mult, 10) + u.name
		}
	}
	return strconv.FormatInt(int64(b), 10) // unreachable: the B unit divides everything
}

// MarshalYAML writes b as size text.
func (b ByteSize) MarshalYAML() (any, error) { return b.String(), nil }

// UnmarshalYAML reads size text or a plain integer from a scalar node.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return errors.New("size must be a scalar")
	}
	v, err := ParseByteSize(n.Value)
	if err != nil {
		return err
	}
	*b = v
	return nil
}

// ParseByteSize parses an integer with an optional unit ("4096", "1MiB",
// "10MB"). A leading minus sign is accepted so that Validate, not the
// parser, reports the rule a negative size breaks.
func ParseByteSize(s string) (ByteSize, error) {
	bad := fmt.Errorf("invalid size %q (want an integer with an optional unit: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)", s)
	num, unit := splitNumber(s)
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return 0, bad
	}
	mult, ok := unitMultiplier(unit)
	if !ok {
		return 0, bad
	}
	if n > math.MaxInt64/mult || n < math.MinInt64/mult {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return ByteSize(n * mult), nil
}

// splitNumber splits s into a leading signed integer and the rest.
func splitNumber(s string) (num, rest string) {
	i := 0
	if i < len(s) && (s[i] == '-' || s[i] == '+') {
		i++
	}
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return s[:i], s[i:]
}

// unitMultiplier returns the number of bytes in one unit; "" means bytes.
func unitMultiplier(unit string) (int64, bool) {
	if unit == "" {
		return 1, true
	}
	for _, u := range byteUnits {
		if strings.EqualFold(unit, u.name) {
			return u.mult, true
		}
	}
	return 0, false
}
