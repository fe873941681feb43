package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/valyala/fasthttp"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "frontends:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("frontends", flag.ContinueOnError)
	server := fs.String("server", "fasthttp", "fasthttp or gnet")
	listen := fs.String("listen", "127.0.0.1:19106", "address to listen on")
	from := fs.String("from", "", "URL whose answer (body and cacheable headers) is served")
	if err := fs.Parse(args); err != nil {
		return err
	}
	h, err := fetchHit(*from)
	if err != nil {
		return err
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	switch *server {
	case "fasthttp":
		return serveFasthttp(*listen, h, stop)
	case "gnet":
		return serveGnet(*listen, h, stop)
	}
	return fmt.Errorf("unknown -server %q (fasthttp, gnet)", *server)
}

// hit is the answer every request gets: header pairs in order, and the body.
type hit struct {
	names, values []string
	body          []byte
}

// keptHeaders are the upstream headers a Levee hit passes on (as
// bench/ceiling keeps them).
var keptHeaders = []string{"Cache-Control", "Content-Type", "Etag", "Last-Modified", "Vary", "X-Request-Id"}

func fetchHit(url string) (*hit, error) {
	if url == "" {
		return nil, errors.New("-from is required")
	}
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	h := &hit{}
	if h.body, err = io.ReadAll(resp.Body); err != nil {
		return nil, err
	}
	add := func(name, value string) {
		h.names = append(h.names, name)
		h.values = append(h.values, value)
	}
	for _, k := range keptHeaders {
		for _, v := range resp.Header.Values(k) {
			add(http.CanonicalHeaderKey(k), v)
		}
	}
	// What Levee adds on a hit (a node named n1), as bench/ceiling does.
	add("Age", "0")
	add("Cache-Status", "levee-n1; hit")
	add("X-Cache", "HIT")
	return h, nil
}

func serveFasthttp(addr string, h *hit, stop <-chan os.Signal) error {
	names, values := make([][]byte, len(h.names)), make([][]byte, len(h.values))
	for i := range h.names {
		names[i], values[i] = []byte(h.names[i]), []byte(h.values[i])
	}
	srv := &fasthttp.Server{
		NoDefaultServerHeader: true,
		ReadTimeout:           10 * time.Second,
		IdleTimeout:           2 * time.Minute,
		Handler: func(ctx *fasthttp.RequestCtx) {
			for i := range names {
				ctx.Response.Header.SetBytesKV(names[i], values[i])
			}
			ctx.Response.SetBodyRaw(h.body)
		},
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe(addr) }()
	select {
	case err := <-errc:
		return err
	case <-stop:
	}
	return srv.Shutdown()
}

// loop is the gnet server: a prepared answer, its Date kept current.
type loop struct {
	gnet.BuiltinEventEngine
	h      *hit
	answer atomic.Pointer[[]byte]
}

func (l *loop) prepare(now time.Time) {
	var b bytes.Buffer
	b.WriteString("HTTP/1.1 200 OK\r\n")
	for i := range l.h.names {
		b.WriteString(l.h.names[i] + ": " + l.h.values[i] + "\r\n")
	}
	b.WriteString("Date: " + now.UTC().Format(http.TimeFormat) + "\r\n")
	b.WriteString("Content-Length: " + strconv.Itoa(len(l.h.body)) + "\r\n\r\n")
	b.Write(l.h.body)
	out := b.Bytes()
	l.answer.Store(&out)
}

func (l *loop) OnTick() (time.Duration, gnet.Action) {
	l.prepare(time.Now())
	return time.Second, gnet.None
}

// OnTraffic answers each complete request head; a partial one waits in
// gnet's buffer for the rest.
func (l *loop) OnTraffic(c gnet.Conn) gnet.Action {
	buf, _ := c.Peek(-1)
	answer := *l.answer.Load()
	used := 0
	for {
		i := bytes.Index(buf[used:], []byte("\r\n\r\n"))
		if i < 0 {
			break
		}
		used += i + 4
		if _, err := c.Write(answer); err != nil {
			return gnet.Close
		}
	}
	_, _ = c.Discard(used)
	return gnet.None
}

func serveGnet(addr string, h *hit, stop <-chan os.Signal) error {
	l := &loop{h: h}
	l.prepare(time.Now())
	errc := make(chan error, 1)
	go func() {
		errc <- gnet.Run(l, "tcp://"+addr, gnet.WithNumEventLoop(1), gnet.WithTicker(true), gnet.WithReusePort(false))
	}()
	select {
	case err := <-errc:
		return err
	case <-stop:
	}
	return gnet.Stop(context.Background(), "tcp://"+addr)
}
