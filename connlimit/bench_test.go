package connlimit

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"
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

// BenchmarkTableKeepAliveCycle is the table's share of one keep-alive
// request, without a network: a next request arrives on an idle
// connection, is received whole, and the connection idles again, over 64
// connections from one address (wrk's, in make bench-compare).
func BenchmarkTableKeepAliveCycle(b *testing.B) {
	t := newTable(Config{}.withDefaults())
	now := time.Unix(1e9, 0)
	key := netip.MustParseAddr("127.0.0.1")
	es := make([]*entry, 64)
	for i := range es {
		es[i] = &entry{}
		if _, ok, _ := t.add(es[i], key, now); !ok {
			b.Fatal("refused")
		}
		t.received(es[i])
		t.idled(es[i])
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		e := es[i%len(es)]
		i++
		if vs := t.arrived(e, now); len(vs) > 0 {
			b.Fatal("evicted")
		}
		t.received(e)
		t.idled(e)
	}
}
