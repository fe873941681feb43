package main

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestSIGHUPReloadsTheConfigFile: a running node that gets SIGHUP reads
// its file again and applies what a reload can (here the admin token); a
// file it cannot apply is logged and the running config kept; SIGTERM
// still stops it in order.
func TestSIGHUPReloadsTheConfigFile(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	file := func(token, http string) string {
		return fmt.Sprintf("node:\n  name: n1\n  http: %s\ncluster:\n  admin_token: %s\nroutes:\n  - name: comments\n    prefix: /comments/\n    upstream: http://127.0.0.1:9000/api/\n", http, token)
	}
	path := writeConfig(t, file("first-admin-token", addr))
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() { done <- run([]string{"-config", path}, env(nil), &stderr) }()
	force := func(token string) int {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/-/breakers/comments/close", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	waitUntil := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; log: %s", what, stderr.String())
			}
		}
	}
	waitUntil("the node to serve", func() bool { return force("first-admin-token") == http.StatusOK })
	if err := os.WriteFile(path, []byte(file("second-admin-token", addr)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitUntil("the new token", func() bool { return force("second-admin-token") == http.StatusOK })
	if st := force("first-admin-token"); st != http.StatusUnauthorized {
		t.Fatalf("the old token after SIGHUP: %d, want 401", st)
	}
	if err := os.WriteFile(path, []byte(file("third-admin-token", "127.0.0.1:1")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitUntil("the refusal in the log", func() bool { return strings.Contains(stderr.String(), "config not reloaded") })
	if st := force("second-admin-token"); st != http.StatusOK || !strings.Contains(stderr.String(), "node.http") {
		t.Fatalf("after a refused reload: %d; log: %s", st, stderr.String())
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit code %d; log: %s", code, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("SIGTERM did not stop the node")
	}
}

// syncBuffer is a bytes.Buffer safe for the node's log goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
