package relay

import (
	"errors"
	"testing"
	"time"
)

func TestShapeValidate(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		name string
		s    Shape
		ok   bool
	}{
		{"zero passes", Shape{}, true},
		{"latency jitter bandwidth", Shape{Latency: 300 * ms, Jitter: 100 * ms, Bandwidth: 256 << 10}, true},
		{"at the bounds", Shape{Latency: MaxLatency, Jitter: MaxLatency, Bandwidth: MinBandwidth}, true},
		{"negative latency", Shape{Latency: -ms}, false},
		{"negative jitter", Shape{Jitter: -ms}, false},
		{"negative bandwidth", Shape{Bandwidth: -1}, false},
		{"latency past the bound", Shape{Latency: MaxLatency + ms}, false},
		{"jitter past the bound", Shape{Jitter: MaxLatency + ms}, false},
		{"bandwidth under the bound", Shape{Bandwidth: MinBandwidth - 1}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.s.Validate()
			if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrBadShape)) {
				t.Fatalf("Validate(%+v) = %v, want ok=%v", c.s, err, c.ok)
			}
		})
	}
}

func TestShapeDelayStaysWithinJitter(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		name string
		s    Shape
		u    float64
		want time.Duration
	}{
		{"no jitter is the latency", Shape{Latency: 300 * ms}, 0.9, 300 * ms},
		{"lowest draw", Shape{Latency: 300 * ms, Jitter: 100 * ms}, 0, 200 * ms},
		{"middle draw", Shape{Latency: 300 * ms, Jitter: 100 * ms}, 0.5, 300 * ms},
		{"highest draw", Shape{Latency: 300 * ms, Jitter: 100 * ms}, 1, 400 * ms},
		{"floored at zero", Shape{Latency: 50 * ms, Jitter: 100 * ms}, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.s.delay(c.u); got != c.want {
				t.Fatalf("delay(%v) = %v, want %v", c.u, got, c.want)
			}
		})
	}
	s := Shape{Latency: 300 * ms, Jitter: 100 * ms}
	for i := range 1000 {
		u := float64(i) / 1000
		if d := s.delay(u); d < 200*ms || d > 400*ms {
			t.Fatalf("delay(%v) = %v, outside [200ms, 400ms]", u, d)
		}
	}
}

func TestShapePlusAddsDelaysAndKeepsNarrowerBandwidth(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		name    string
		a, b    Shape
		wantSum Shape
	}{
		{"zero plus zero", Shape{}, Shape{}, Shape{}},
		{"delays add", Shape{Latency: 100 * ms, Jitter: 10 * ms}, Shape{Latency: 200 * ms, Jitter: 20 * ms},
			Shape{Latency: 300 * ms, Jitter: 30 * ms}},
		{"one limited", Shape{Bandwidth: 4096}, Shape{}, Shape{Bandwidth: 4096}},
		{"other limited", Shape{}, Shape{Bandwidth: 4096}, Shape{Bandwidth: 4096}},
		{"narrower wins", Shape{Bandwidth: 8192}, Shape{Bandwidth: 4096}, Shape{Bandwidth: 4096}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.a.Plus(c.b); got != c.wantSum {
				t.Fatalf("%v.Plus(%v) = %v, want %v", c.a, c.b, got, c.wantSum)
			}
		})
	}
}

func TestShapeString(t *testing.T) {
	cases := []struct {
		s    Shape
		want string
	}{
		{Shape{Latency: 300 * time.Millisecond}, "300ms"},
		{Shape{Latency: 300 * time.Millisecond, Jitter: 100 * time.Millisecond, Bandwidth: 256 << 10}, "300ms±100ms 256KiB/s"},
		{Shape{Bandwidth: 2 << 20}, "0s 2MiB/s"},
		{Shape{Bandwidth: 1500}, "0s 1500B/s"},
	}
	for _, c := range cases {
		if got := c.s.String(); got != c.want {
			t.Errorf("String() = %q, want %q", got, c.want)
		}
	}
}
