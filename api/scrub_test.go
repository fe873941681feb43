package api

import (
	"errors"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestScrub(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"refused dial", "dial tcp 10.1.2.3:7000: connect: connection refused", "dial tcp [address]: connect: connection refused"},
		{"both ends of a connection", "read tcp 10.0.0.1:8080->10.0.0.5:1234: i/o timeout", "read tcp [address]->[address]: i/o timeout"},
		{"IPv6 with a port", "dial tcp [::1]:7000: connect", "dial tcp [address]: connect"},
		{"bare IPv6, with a zone", "fe80::1%eth0 and 2001:db8::1.", "[address] and [address]."},
		{"host and port in a URL", "Get http://upstream.internal:8443/x", "Get http://[address]/x"},
		{"resolver address", "lookup up.internal on 127.0.0.53:53: no such host", "lookup up.internal on [address]: no such host"},
		{"IPv4 glued to text", "x10.0.0.3:7000y", "x[address]y"},
		{"package prefixes", "api: path not allowed: proxy: bad request: dot segment \"..\" in path",
			"path not allowed: bad request: dot segment \"..\" in path"},
		{"prefix-like words inside a sentence stay", "the proxy: is not a prefix here", "the proxy: is not a prefix here"},
		{"names and numbers that are no address", `route "comments-v2": status 503, 2048 bytes > 1024`, `route "comments-v2": status 503, 2048 bytes > 1024`},
		{"already scrubbed", "[address]", "[address]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := scrub(tt.in); got != tt.want {
				t.Fatalf("scrub(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// FuzzScrubHidesAddresses: an IPv4 address and port survives scrub
// nowhere, whatever text it is glued into; an IPv6 one, or a host and
// port, nowhere it stands as a word of its own.
func FuzzScrubHidesAddresses(f *testing.F) {
	f.Add("dial tcp ", ": connect: connection refused", []byte{10, 1, 2, 3}, uint16(7000), []byte{0xfe, 0x80, 15: 1})
	f.Add("x", "9", []byte{255, 255, 255, 255}, uint16(0), []byte{15: 1})
	f.Add("1.2.3", ".4:5", []byte{0, 0, 0, 0}, uint16(65535), []byte{10: 0xff, 11: 0xff, 12: 10, 15: 3})
	f.Add("0", "0", []byte("0000"), uint16(7069), []byte("00Z000000000\x00\x00\x00\x00")) // an address ending "::"
	f.Fuzz(func(t *testing.T, before, after string, v4 []byte, port uint16, v6 []byte) {
		if len(v4) < 4 || len(v6) < 16 {
			return
		}
		a4 := netip.AddrPortFrom(netip.AddrFrom4([4]byte(v4)), port).String()
		if got := scrub(before + a4 + after); strings.Contains(got, a4) {
			t.Fatalf("scrub(%q) = %q, shows %s", before+a4+after, got, a4)
		}
		ip6 := netip.AddrFrom16([16]byte(v6))
		for _, a := range []string{ip6.String(), netip.AddrPortFrom(ip6, port).String(), "upstream.internal:" + strconv.Itoa(int(port))} {
			in := before + " " + a + " " + after
			if got := scrub(in); strings.Count(got, a) > strings.Count(before, a)+strings.Count(after, a) {
				t.Fatalf("scrub(%q) = %q, shows %s", in, got, a)
			}
		}
	})
}

// TestScrubTriesOnlyAnAddressLengthToken: what scrub does not try to read
// as an address (a token longer than any, punctuation beyond the last
// few) stays as it is; what it tries still goes.
func TestScrubTriesOnlyAnAddressLengthToken(t *testing.T) {
	long := strings.Repeat("a", maxAddressLen+maxTrailingTrim) + ":80"
	tests := []struct{ name, in, want string }{
		{"a host and port ending a sentence", "db.internal:5432.", "[address]."},
		{"three colons after an IPv6 address", "fe80::1:::", "[address]:::"},
		{"a name longer than any address", long, long},
		{"punctuation past the last few", "db.internal:5432.....", "db.internal:5432....."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := scrub(tt.in); got != tt.want {
				t.Fatalf("scrub(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// TestAHugePathsNotFoundIsCheapAndShort: a 404 echoes the path it found
// no route for. Through a real listener, a 256 KiB path made to cost the
// square of its length (one run of a token's characters, then one of
// dots: each dot was stripped and the rest read again, minutes of CPU
// near the 1 MiB header limit) is answered at once, its detail cut to
// maxDetail bytes.
func TestAHugePathsNotFoundIsCheapAndShort(t *testing.T) {
	s := newTestServer(t, &fakeEngine{}, nil)
	base := "http://" + listenFor(t, s, ListenConfig{})
	path := "/" + strings.Repeat("x", 128<<10) + strings.Repeat(".", 128<<10)
	// Generous: the linear scrub takes milliseconds; the quadratic one
	// took 6 s for half this path on this machine.
	client := &http.Client{Timeout: 20 * time.Second}
	resp, err := client.Get(base + path)
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		t.Fatalf("GET the long path: %v", ue.Err) // not the 256 KiB URL
	} else if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := checkProblem(t, resp.StatusCode, resp.Header, resp.Body, http.StatusNotFound)
	if len(p.Detail) > maxDetail || !strings.HasSuffix(p.Detail, "…") {
		t.Fatalf("detail is %d bytes (max %d), ends %q", len(p.Detail), maxDetail, p.Detail[max(len(p.Detail)-8, 0):])
	}
}

func TestTruncatedCutsOnARuneBoundary(t *testing.T) {
	s := strings.Repeat("é", maxDetail) // 2 bytes each
	got := truncated(s)
	if len(got) > maxDetail || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
		t.Fatalf("truncated: %d bytes, valid %v", len(got), utf8.ValidString(got))
	}
	if short := "no route"; truncated(short) != short {
		t.Fatalf("truncated(%q) = %q", short, truncated(short))
	}
}
