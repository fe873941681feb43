package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
)

// idLen is every key's id length: the demo upstream's comments answer
// repeats the id ten times, and at 64 characters (its maximum) the answer
// is about 1 KiB (as in bench/compare).
const idLen = 64

// maxKeys keeps every id numbered in keyFormat's eight digits.
const maxKeys = 99_999_999

// keyFormat numbers the keys; "m" keeps them apart from bench/compare's.
const keyFormat = "m%08d"

var keyPad = strings.Repeat("x", idLen-len(fmt.Sprintf(keyFormat, 0)))

// keyPath is the path of key i.
func keyPath(i int) string {
	return "/api/stories/" + fmt.Sprintf(keyFormat, i) + keyPad + "/comments"
}

// fill GETs keys 0..n-1 through base with conns clients and returns the
// bodies' total length. Any answer but 200 fails the run: an error is not
// a cached answer.
func fill(ctx context.Context, base string, n, conns int) (int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns}}
	var next, bytes atomic.Int64
	errs := make(chan error, conns)
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(n) && ctx.Err() == nil; i = next.Add(1) - 1 {
				b, err := get(ctx, client, base+keyPath(int(i)))
				if err != nil {
					errs <- err
					cancel() // one failure ends the run: stop the others
					return
				}
				bytes.Add(b)
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return bytes.Load(), ctx.Err()
}

// get reads one answer whole and returns its body's length.
func get(ctx context.Context, client *http.Client, url string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: status %d", url, resp.StatusCode)
	}
	return n, err
}
