package config

import (
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

func TestParseDuration(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    time.Duration
		wantErr bool
	}{
		{name: "millis", in: "150ms", want: 150 * time.Millisecond},
		{name: "seconds", in: "15s", want: 15 * time.Second},
		{name: "minutes", in: "10m", want: 10 * time.Minute},
		{name: "hours", in: "2h", want: 2 * time.Hour},
		{name: "compound", in: "1h30m", want: 90 * time.Minute},
		{name: "zero", in: "0", want: 0},
		{name: "negative parses", in: "-5s", want: -5 * time.Second},
		{name: "space before unit", in: "15 s", wantErr: true},
		{name: "bare number", in: "15", wantErr: true},
		{name: "word", in: "abc", wantErr: true},
		{name: "empty", in: "", wantErr: true},
		{name: "days unsupported", in: "1d", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseDuration(tt.in)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("ParseDuration(%q) = %v, want error", tt.in, got)
				}
				return
			}
			if err != nil || got.D() != tt.want {
				t.Fatalf("ParseDuration(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestParseByteSize(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    int64
		wantErr string
	}{
		{name: "plain", in: "4096", want: 4096},
		{name: "bytes unit", in: "12B", want: 12},
		{name: "KiB", in: "512KiB", want: 512 << 10},
		{name: "MiB", in: "1MiB", want: 1 << 20},
		{name: "256MiB", in: "256MiB", want: 256 << 20},
		{name: "GiB", in: "2GiB", want: 2 << 30},
		{name: "TiB", in: "1TiB", want: 1 << 40},
		{name: "decimal MB", in: "10MB", want: 10_000_000},
		{name: "decimal KB", in: "3KB", want: 3000},
		{name: "case-insensitive", in: "1mib", want: 1 << 20},
		{name: "zero", in: "0", want: 0},
		{name: "negative parses", in: "-1KiB", want: -1024},
		{name: "space before unit", in: "1 MiB", wantErr: "invalid size"},
		{name: "unknown unit", in: "1XB", wantErr: "invalid size"},
		{name: "fraction", in: "1.5MiB", wantErr: "invalid size"},
		{name: "unit only", in: "MiB", wantErr: "invalid size"},
		{name: "empty", in: "", wantErr: "invalid size"},
		{name: "overflow after unit", in: "9000000TiB", wantErr: "too large"},
		{name: "overflow int", in: "99999999999999999999", wantErr: "invalid size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseByteSize(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseByteSize(%q) = %v, %v; want error containing %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got.Int64() != tt.want {
				t.Fatalf("ParseByteSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestByteSizeString(t *testing.T) {
	tests := []struct {
		name string
		in   ByteSize
		want string
	}{
		{name: "zero", in: 0, want: "0"},
		{name: "MiB", in: 256 << 20, want: "256MiB"},
		{name: "KiB", in: 4096, want: "4KiB"},
		{name: "decimal", in: 10_000_000, want: "10MB"},
		{name: "odd", in: 4097, want: "4097B"},
		{name: "negative", in: -1 << 20, want: "-1MiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.in.String(); got != tt.want {
				t.Fatalf("String() = %q, want %q", got, tt.want)
			}
			back, err := ParseByteSize(tt.in.String())
			if err != nil || back != tt.in {
				t.Fatalf("ParseByteSize(String()) = %d, %v; want %d", back, err, tt.in)
			}
		})
	}
}

// TestYAMLMethods checks the YAML (un)marshalers used when these types are
// decoded by plain yaml.v3, outside Parse.
func TestYAMLMethods(t *testing.T) {
	type doc struct {
		D Duration `yaml:"d"`
		B ByteSize `yaml:"b"`
	}
	in := doc{D: Duration(90 * time.Second), B: 3 << 20}
	out, err := yaml.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := "d: 1m30s\nb: 3MiB\n"; string(out) != want {
		t.Fatalf("Marshal = %q, want %q", out, want)
	}
	var back doc
	if err := yaml.Unmarshal(out, &back); err != nil || back != in {
		t.Fatalf("Unmarshal = %+v, %v; want %+v", back, err, in)
	}
	for _, bad := range []string{"d: 15 s", "b: 1 MiB", "d: [1s]", "b: {x: 1}"} {
		if err := yaml.Unmarshal([]byte(bad), &back); err == nil {
			t.Errorf("Unmarshal(%q) succeeded, want error", bad)
		}
	}
}
