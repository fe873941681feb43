package hostkey

import "testing"

func TestParseNormalisesAnOrigin(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"https default port", "https://api.example.com", "https://api.example.com:443"},
		{"http default port", "http://api.example.com/", "http://api.example.com:80"},
		{"explicit default port", "https://api.example.com:443", "https://api.example.com:443"},
		{"case folded", "HTTPS://API.Example.COM", "https://api.example.com:443"},
		{"other port", "http://10.0.0.7:8080", "http://10.0.0.7:8080"},
		{"ipv6", "http://[::1]:9000", "http://[::1]:9000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.in)
			if err != nil || got != tt.want {
				t.Fatalf("Parse(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestParseRefusesMoreThanAnOrigin(t *testing.T) {
	for _, in := range []string{
		"", "api.example.com", "ftp://api.example.com", "https://", "https://api.example.com:0",
		"https://api.example.com:99999", "https://api.example.com/v1", "https://api.example.com/?a=1",
		"https://u:p@api.example.com", "https://api.example.com/#x", "https://api.example.com?",
	} {
		if got, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) = %q, want an error", in, got)
		}
	}
}
