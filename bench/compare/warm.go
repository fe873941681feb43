package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// warmCmd asks the server for keys 0..N-1 once each, C at a time, so the
// measured run that follows finds every key cached. A key that does not
// answer 200 fails the warm-up: its misses would be measured as hits.
func warmCmd(args []string) error {
	fs := flag.NewFlagSet("compare warm", flag.ContinueOnError)
	base := fs.String("base", "", "the server's base URL (required)")
	keys := fs.Int("keys", 1, "number of keys, from key 0 (the hot key)")
	conc := fs.Int("c", 64, "requests in flight")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *base == "" {
		return errors.New("compare warm: -base is required")
	}
	if err := checkKeys(*keys); err != nil {
		return err
	}
	client := &http.Client{
		Transport: &http.Transport{MaxIdleConnsPerHost: *conc, DisableCompression: true},
		Timeout:   30 * time.Second,
	}
	base2 := strings.TrimSuffix(*base, "/")
	var next, failed atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for range max(*conc, 1) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < *keys; i = int(next.Add(1) - 1) {
				if err := getOK(client, base2+keyPath(i)); err != nil {
					failed.Add(1)
					once.Do(func() { firstErr = err })
				}
			}
		})
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		return fmt.Errorf("compare warm: %d of %d keys failed, first: %w", n, *keys, firstErr)
	}
	return nil
}

func getOK(client *http.Client, url string) error {
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}
