package connlimit

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
)

// BenchmarkKeepAliveRequest is one GET on a kept-alive connection through
// a Listener, client included: what the table's bookkeeping adds to every
// request (instructions per op under callgrind are the steady figure).
func BenchmarkKeepAliveRequest(b *testing.B) {
	l := serve(b, Config{}, &http.Server{Handler: okHandler()})
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	req := []byte("GET / HTTP/1.1\r\nHost: bench\r\n\r\n")
	for b.Loop() {
		if _, err := c.Write(req); err != nil {
			b.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}
