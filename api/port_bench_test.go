package api

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// BenchmarkPortHit is a fresh hit through a whole app port (Listen:
// net/http, connlimit, Levee's handler) over loopback TCP, one keep-alive
// connection, beside "ceiling": a bare net/http server answering the same
// bytes with the same header set, as bench/ceiling does. Under callgrind
// the user-space instructions per request of the two (the kernel's are
// the same) are what make bench-compare's ratio, without its noise:
//
//	go test -c -o /tmp/api.test ./api/
//	GOGC=off GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind /tmp/api.test \
//	  -test.run '^$' -test.bench 'BenchmarkPortHit/levee$' -test.benchtime 22000x   # and 2000x
func BenchmarkPortHit(b *testing.B) {
	s := newHitServer(b, "")
	l, err := s.Listen("127.0.0.1:0", ListenConfig{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Shutdown(b.Context()) })
	b.Run("levee", func(b *testing.B) { keepAliveGets(b, l.Addr(), "/open/stories/1") })

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: ceilingHit(), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Close() })
	b.Run("ceiling", func(b *testing.B) { keepAliveGets(b, ln.Addr().String(), "/open/stories/1") })
}

// ceilingHit answers hitBody with the header set a Levee hit of it
// carries, assigned from a prepared map (bench/ceiling's handler).
func ceilingHit() http.Handler {
	h := http.Header{"Content-Type": {"application/json"}, "Etag": {`"v1"`},
		"Cache-Control": {"public, max-age=3600"}, "Last-Modified": {"Mon, 02 Jun 2025 10:00:00 GMT"},
		"Age": {"0"}, "Cache-Status": {"levee-n1; hit"}, "X-Cache": {"HIT"}, "X-Request-Id": {"r-1"},
		"Content-Length": {strconv.Itoa(len(hitBody))}}
	body := []byte(hitBody)
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		dst := w.Header()
		for k, v := range h {
			dst[k] = v
		}
		_, _ = w.Write(body)
	})
}

// keepAliveGets sends b.N GETs for target on one connection to addr, as
// wrk does, and reads each answer to the end of its Content-Length body.
func keepAliveGets(b *testing.B, addr, target string) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	req := []byte("GET " + target + " HTTP/1.1\r\nHost: bench\r\n\r\n")
	br := bufio.NewReaderSize(c, 16<<10)
	body := make([]byte, 0, 4096)
	get := func() {
		if _, err := c.Write(req); err != nil {
			b.Fatal(err)
		}
		n := -1
		for {
			line, err := br.ReadSlice('\n')
			if err != nil {
				b.Fatal(err)
			}
			if len(line) <= 2 {
				break
			}
			if v, ok := bytes.CutPrefix(line, []byte("Content-Length: ")); ok {
				n, _ = strconv.Atoi(string(bytes.TrimSpace(v)))
			}
		}
		if n < 0 {
			b.Fatal("an answer without Content-Length")
		}
		if _, err := io.ReadFull(br, body[:n]); err != nil {
			b.Fatal(err)
		}
	}
	get() // the miss that stores the key
	b.ResetTimer()
	for b.Loop() {
		get()
	}
}
