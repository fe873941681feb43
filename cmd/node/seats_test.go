package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/levee/levee/node"
)

// fakeAdmin answers one admin path like a node would, and records the call.
func fakeAdmin(t *testing.T, status int, body string) (*httptest.Server, *http.Request) {
	t.Helper()
	var got http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = *r.Clone(context.Background())
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, &got
}

func TestSeatCommands(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		args       []string
		env        map[string]string
		status     int
		body       string
		wantCode   int
		wantMethod string
		wantPath   string
		wantToken  string
		wantOut    string
	}{
		{name: "leave", args: []string{"leave"}, env: map[string]string{"LEVEE_ADMIN_TOKEN": "tok"},
			status: 200, body: `{"node":"n2","status":"left; stopping"}`, wantMethod: "POST", wantPath: "/-/leave", wantToken: "tok", wantOut: "n2 left"},
		{name: "leave with a token file", args: []string{"leave", "-token-file", tokenFile},
			status: 200, body: `{"node":"n2"}`, wantMethod: "POST", wantPath: "/-/leave", wantToken: "from-file", wantOut: "n2 left"},
		{name: "leave refused", args: []string{"leave"}, env: map[string]string{"LEVEE_ADMIN_TOKEN": "tok"},
			status: 503, body: `{"detail":"no leader"}`, wantCode: 1, wantMethod: "POST", wantPath: "/-/leave", wantOut: "no leader"},
		{name: "leave without a token", args: []string{"leave"}, wantCode: 2, wantOut: "no admin token"},
		{name: "remove", args: []string{"remove", "n3"}, env: map[string]string{"LEVEE_ADMIN_TOKEN": "tok"},
			status: 200, body: `{"node":"n3","status":"removed"}`, wantMethod: "DELETE", wantPath: "/-/cluster/members/n3", wantToken: "tok", wantOut: "n3 removed"},
		{name: "remove an alive member", args: []string{"remove", "n3"}, env: map[string]string{"LEVEE_ADMIN_TOKEN": "tok"},
			status: 409, body: `{"detail":"n3 is alive in gossip"}`, wantCode: 1, wantMethod: "DELETE", wantPath: "/-/cluster/members/n3", wantOut: "alive in gossip"},
		{name: "remove without a name", args: []string{"remove"}, env: map[string]string{"LEVEE_ADMIN_TOKEN": "tok"}, wantCode: 2, wantOut: "usage: levee remove"},
		{name: "not JSON", args: []string{"leave"}, env: map[string]string{"LEVEE_ADMIN_TOKEN": "tok"},
			status: 502, body: `oops`, wantCode: 1, wantMethod: "POST", wantPath: "/-/leave", wantOut: "no JSON body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, got := fakeAdmin(t, tt.status, tt.body)
			e := map[string]string{"LEVEE_ADDR": srv.URL}
			for k, v := range tt.env {
				e[k] = v
			}
			var stdout, stderr bytes.Buffer
			if code := runTo(tt.args, env(e), &stdout, &stderr); code != tt.wantCode {
				t.Fatalf("exit code = %d, want %d; stderr: %s", code, tt.wantCode, &stderr)
			}
			if out := stdout.String() + stderr.String(); !strings.Contains(out, tt.wantOut) {
				t.Fatalf("output lacks %q: %s", tt.wantOut, out)
			}
			if tt.wantMethod == "" {
				return
			}
			if got.Method != tt.wantMethod || got.URL.Path != tt.wantPath {
				t.Fatalf("called %s %s, want %s %s", got.Method, got.URL.Path, tt.wantMethod, tt.wantPath)
			}
			if tt.wantToken != "" && got.Header.Get("Authorization") != "Bearer "+tt.wantToken {
				t.Fatalf("Authorization = %q", got.Header.Get("Authorization"))
			}
		})
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestRecoverCommand runs levee recover on a real data dir: a one-voter
// node that is then told its voters are {n1} at a new Raft address starts
// as the leader again; usage errors and a running node are refused.
func TestRecoverCommand(t *testing.T) {
	dir := t.TempDir()
	raftAddr := freeAddr(t)
	yaml := strings.Replace(validYAML, "  http: 127.0.0.1:7001", fmt.Sprintf("  http: 127.0.0.1:0\n  raft: %s\n  data_dir: %s", raftAddr, dir), 1)
	yaml = strings.Replace(yaml, "routes:", "cluster:\n  secret: a-secret-for-the-recover-test\nroutes:", 1)
	path := writeConfig(t, yaml)

	stop := runNode(t, path)
	var stdout, stderr bytes.Buffer
	if code := runTo([]string{"recover", "-config", path, "-voters", "n1=" + raftAddr}, env(nil), &stdout, &stderr); code != 1 {
		t.Fatalf("recover on a running node: exit %d, want 1; stderr %s", code, &stderr)
	}
	stop()

	for _, bad := range [][]string{
		{"recover", "-config", path},
		{"recover", "-config", path, "-voters", "n1"},
		{"recover", "-voters", "n1=" + raftAddr},
	} {
		if code := runTo(bad, env(nil), &stdout, &stderr); code != 2 {
			t.Fatalf("%v: exit %d, want 2", bad, code)
		}
	}
	stderr.Reset()
	if code := runTo([]string{"recover", "-config", path, "-voters", "n2=" + raftAddr}, env(nil), &stdout, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), "must include this node") {
		t.Fatalf("voters without this node: exit %d; stderr %s", code, &stderr)
	}
	stdout.Reset()
	if code := runTo([]string{"recover", "-config", path, "-voters", "n1=" + raftAddr}, env(nil), &stdout, &stderr); code != 0 {
		t.Fatalf("recover: exit %d; stderr %s", code, &stderr)
	}
	if !strings.Contains(stdout.String(), "recovered n1") {
		t.Fatalf("stdout = %q", &stdout)
	}
	runNode(t, path)()
}

// runNode serves the config in the background until it leads its Raft
// group, and returns the function that stops it.
func runNode(t *testing.T, path string) (stop func()) {
	t.Helper()
	cfg, err := loadConfig([]string{"-config", path}, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Node.HTTP = ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- serve(ctx, cfg, slog.New(slog.DiscardHandler), node.Options{Logger: slog.New(slog.DiscardHandler)})
	}()
	deadline := time.Now().Add(20 * time.Second)
	for !leads(cfg.Node.HTTP) {
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatal("node never led its one-voter cluster")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("serve exit code %d", code)
		}
	}
}

func leads(addr string) bool {
	resp, err := http.Get("http://" + addr + "/-/cluster")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var st struct {
		Raft struct{ Leader string } `json:"raft"`
	}
	return json.NewDecoder(resp.Body).Decode(&st) == nil && st.Raft.Leader == "n1"
}

// TestJobCommandsOnASingleNode runs the CLI against a real single node
// given only a data dir (no node.raft, no secret): a write preferring
// respond-async becomes a job, which levee jobs lists as dead after the
// upstream's 400, levee job replay queues again, and levee status counts.
func TestJobCommandsOnASingleNode(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no such order", http.StatusBadRequest)
	}))
	defer up.Close()
	const token = "a-token-for-the-job-commands"
	yaml := strings.Replace(validYAML, "  http: 127.0.0.1:7001", fmt.Sprintf("  http: %s\n  data_dir: %s", freeAddr(t), t.TempDir()), 1)
	yaml = strings.Replace(yaml, "http://127.0.0.1:9000/api/", up.URL+"/api/", 1)
	yaml = strings.Replace(yaml, "routes:", "cluster:\n  admin_token: "+token+"\nroutes:", 1)
	cfg, err := loadConfig([]string{"-config", writeConfig(t, yaml)}, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- serve(ctx, cfg, slog.New(slog.DiscardHandler), node.Options{Logger: slog.New(slog.DiscardHandler)})
	}()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("serve exit code %d", code)
		}
	}()
	base := "http://" + cfg.Node.HTTP
	var resp *http.Response
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		req, _ := http.NewRequest(http.MethodPost, base+"/comments/orders/1", strings.NewReader("{}"))
		req.Header.Set("Prefer", "respond-async")
		if resp, err = http.DefaultClient.Do(req); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node never answered: %v", err)
		}
	}
	var job struct{ ID string }
	err = json.NewDecoder(resp.Body).Decode(&job)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || err != nil {
		t.Fatalf("enqueue: %d (%v), want 202", resp.StatusCode, err)
	}
	e := env(map[string]string{"LEVEE_ADDR": cfg.Node.HTTP, "LEVEE_ADMIN_TOKEN": token})
	var stdout, stderr bytes.Buffer
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(stdout.String(), job.ID); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("levee jobs -state dead never listed %s: %s%s", job.ID, &stdout, &stderr)
		}
		stdout.Reset()
		if code := runTo([]string{"jobs", "-state", "dead"}, e, &stdout, &stderr); code != 0 {
			t.Fatalf("levee jobs: exit %d; stderr %s", code, &stderr)
		}
	}
	if code := runTo([]string{"job", "replay", job.ID}, e, &stdout, &stderr); code != 0 {
		t.Fatalf("levee job replay: exit %d; stderr %s", code, &stderr)
	}
	stdout.Reset()
	if code := runTo([]string{"status"}, e, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "queue") {
		t.Fatalf("levee status: exit %d, stdout %s, stderr %s", code, &stdout, &stderr)
	}
}
