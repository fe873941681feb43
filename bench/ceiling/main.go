package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "ceiling:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("ceiling", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:19101", "address to listen on")
	from := fs.String("from", "", "URL whose answer (body and cacheable headers) is served; \"\" = a generated body of -size bytes")
	size := fs.Int("size", 1024, "body size in bytes when -from is empty")
	if err := fs.Parse(args); err != nil {
		return err
	}
	h, err := newHit(*from, *size)
	if err != nil {
		return err
	}
	srv := &http.Server{Addr: *listen, Handler: h, ReadHeaderTimeout: 5 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// hit is the whole server: one body, one header set.
type hit struct {
	header http.Header // canonical keys, ready to copy
	body   []byte
}

// ServeHTTP assigns the prepared slices instead of calling Header().Set,
// which would canonicalize and allocate per request: the ceiling is the
// least a Go handler can do, not a typical one.
func (h *hit) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	dst := w.Header()
	for k, v := range h.header {
		dst[k] = v
	}
	_, _ = w.Write(h.body)
}

// keptHeaders are the upstream headers a Levee hit passes on.
var keptHeaders = []string{"Cache-Control", "Content-Type", "Etag", "Last-Modified", "Vary", "X-Request-Id"}

func newHit(from string, size int) (*hit, error) {
	h := &hit{header: http.Header{}}
	if from == "" {
		h.body = generated(size)
		h.header.Set("Content-Type", "application/json")
		h.header.Set("Cache-Control", "public, max-age=600")
	} else if err := h.copyFrom(from); err != nil {
		return nil, err
	}
	// What Levee adds on a hit (a node named n1).
	h.header.Set("Age", "0")
	h.header.Set("Cache-Status", "levee-n1; hit")
	h.header.Set("X-Cache", "HIT")
	h.header.Set("Content-Length", strconv.Itoa(len(h.body)))
	return h, nil
}

func (h *hit) copyFrom(url string) error {
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if h.body, err = io.ReadAll(resp.Body); err != nil {
		return err
	}
	for _, k := range keptHeaders {
		if v := resp.Header.Values(k); len(v) > 0 {
			h.header[http.CanonicalHeaderKey(k)] = v
		}
	}
	return nil
}

// generated is a JSON object of exactly size bytes (at least its frame).
func generated(size int) []byte {
	const frame = `{"data":""}`
	return []byte(`{"data":"` + strings.Repeat("x", max(size-len(frame), 0)) + `"}`)
}
