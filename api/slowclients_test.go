package api

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// Issue 24, part 1, on one listener with the default node.* limits: slow
// senders from one address must not keep other clients out, and 2,000
// keep-alive connections from one address (app servers behind a NAT)
// must all be served. cmd/node's TestSlowClientsLeaveTheNodeServing runs
// the whole scenario against a node process.

var (
	abuserAddr   = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}
	ordinaryAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}
)

// TestSlowSendersDoNotKeepOtherClientsOut: 1,500 connections trickling
// their headers and 300 sending a declared body slowly, all from
// 127.0.0.1 and all re-opened when closed, leave every GET on a new
// connection from 127.0.0.2 answered within 2 s. (Before, the first 1,024
// of them held every slot until read_timeout, 10 s.)
func TestSlowSendersDoNotKeepOtherClientsOut(t *testing.T) {
	s := newTestServer(t, &fakeEngine{resp: okResponse()}, nil)
	l, err := s.Listen("127.0.0.1:0", ListenConfig{}) // the defaults
	if err != nil {
		t.Fatal(err)
	}
	defer l.Shutdown(context.Background())
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { holdSlowSenders(ctx, t, l.Addr(), 1500, 300) })
	defer wg.Wait()
	defer stop()

	time.Sleep(time.Second) // the slow senders are in
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: (&net.Dialer{LocalAddr: ordinaryAddr}).DialContext, DisableKeepAlives: true}}
	for i := range 20 {
		start := time.Now()
		resp, err := client.Get(fmt.Sprintf("http://%s/comments/%d", l.Addr(), i))
		took := time.Since(start)
		if err != nil {
			t.Fatalf("GET %d from another address: %v after %v", i, err, took)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || took > 2*time.Second {
			t.Fatalf("GET %d from another address: %d after %v, want 200 within 2 s", i, resp.StatusCode, took)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// holdSlowSenders keeps trickle + slowBody slow connections to addr open
// from abuserAddr until ctx ends: every 500 ms each sends one more byte,
// and one found closed is opened again.
func holdSlowSenders(ctx context.Context, t *testing.T, addr string, trickle, slowBody int) {
	conns := make([]net.Conn, trickle+slowBody)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	d := net.Dialer{LocalAddr: abuserAddr, Timeout: 200 * time.Millisecond}
	for {
		for i, c := range conns {
			if ctx.Err() != nil {
				return
			}
			if c != nil {
				c.SetWriteDeadline(time.Now().Add(10 * time.Millisecond))
				if _, err := c.Write([]byte("a")); err == nil {
					continue
				}
				c.Close()
			}
			conns[i] = nil
			if c, err := d.DialContext(ctx, "tcp", addr); err == nil {
				first := "GET /comments/slow HTTP/1.1\r\nHost: levee\r\nX-Slow: "
				if i >= trickle {
					first = "POST /comments/slow HTTP/1.1\r\nHost: levee\r\nContent-Length: 100000\r\n\r\n"
				}
				io.WriteString(c, first)
				conns[i] = c
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// TestTwoThousandKeepAliveConnectionsFromOneAddressAreServed: app servers
// behind one NAT address open 2,000 keep-alive connections at once; each
// is served twice, none refused or closed in between. (Before, the
// 1,025th waited in the backlog until an idle one timed out, 2 min.)
func TestTwoThousandKeepAliveConnectionsFromOneAddressAreServed(t *testing.T) {
	s := newTestServer(t, &fakeEngine{resp: okResponse()}, nil)
	l, err := s.Listen("127.0.0.1:0", ListenConfig{} /* the defaults */) // the defaults
	if err != nil {
		t.Fatal(err)
	}
	defer l.Shutdown(context.Background())
	peak := make(chan int)
	stopPeak := make(chan struct{})
	go func() { // the most pending at once, for the log
		most := 0
		for {
			select {
			case <-stopPeak:
				peak <- most
				return
			case <-time.After(time.Millisecond):
				most = max(most, l.Conns().Pending)
			}
		}
	}()
	defer func() { close(stopPeak); t.Logf("pending at most %d at once; closed %v", <-peak, l.Conns().Closed) }()
	const n = 2000
	conns := make([]net.Conn, n)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	readers := make([]*bufio.Reader, n)
	round := func(name string, open bool) {
		t.Helper()
		errs := make(chan error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				if open {
					c, err := (&net.Dialer{LocalAddr: abuserAddr}).Dial("tcp", l.Addr())
					if err != nil {
						errs <- err
						return
					}
					conns[i], readers[i] = c, bufio.NewReader(c)
				}
				if err := getOn(conns[i], readers[i], i); err != nil {
					errs <- fmt.Errorf("connection %d: %w", i, err)
				}
			})
		}
		wg.Wait()
		close(errs)
		failed := 0
		for err := range errs {
			if failed++; failed <= 3 {
				t.Errorf("%s: %v", name, err)
			}
		}
		if failed > 0 {
			t.Fatalf("%s: %d of %d connections failed", name, failed, n)
		}
	}
	round("first requests, 2,000 connections opened at once", true)
	round("second requests on the same connections", false)
}

// getOn sends a GET on c and reads its 200, within 10 s.
func getOn(c net.Conn, r *bufio.Reader, i int) error {
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(c, "GET /comments/%d HTTP/1.1\r\nHost: levee\r\n\r\n", i); err != nil {
		return err
	}
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}
