package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// A node's documents as the admin API sends them (compact: -json must
// print them indented).
const (
	clusterDoc = `{"node":"n1","http":"127.0.0.1:8080","members":[` +
		`{"name":"n1","state":"alive","http":"127.0.0.1:8080","gossip":"127.0.0.1:7946","raft":"127.0.0.1:8300","ring_share":0.5},` +
		`{"name":"n2","state":"dead","http":"127.0.0.1:8081","gossip":"127.0.0.1:7947","raft":"127.0.0.1:8301","ring_share":0.5}],` +
		`"raft":{"state":"Leader","leader":"n1","term":4,"commit_index":9,"applied_index":9,"voters":["n1","n2","n3"],` +
		`"last_contact_seconds":0,"quorum_reachable":true,"caught_up":true}}`
	breakersDoc = `[{"route":"comments","state":"open","failures_in_window":3,"nodes_in_window":1,"seconds_until_half_open":12.5,"transitions":1},` +
		`{"route":"users","state":"half-open","failures_in_window":0,"nodes_in_window":0,"seconds_until_half_open":0,"prober":"n2","transitions":2},` +
		`{"route":"orders","state":"open","failures_in_window":0,"nodes_in_window":0,"seconds_until_half_open":0,"forced":true,"transitions":1}]`
	readyDoc   = `{"status":"ready","node":"n1"}`
	ownerDoc   = `{"route":"comments","owner":"n2","replicas":["n2","n3"]}`
	metricsDoc = `# HELP levee_queue_jobs Jobs held.
# TYPE levee_queue_jobs gauge
levee_queue_jobs{host="http://up:9000",state="queued"} 2
levee_queue_jobs{host="http://up:9000",state="delayed"} 3
levee_queue_jobs{host="http://other:9000",state="dead"} 1
levee_queue_oldest_job_age_seconds 12.2
# HELP levee_host_limit The limit this node applies to each upstream host.
# TYPE levee_host_limit gauge
levee_host_limit{host="http://up:9000",kind="rate"} 12.5
levee_host_limit{host="http://up:9000",kind="inflight"} 8
levee_host_limit{host="http://other:9000",kind="rate"} 16.666666666666668
levee_host_limit{host="http://other:9000",kind="inflight"} 32
levee_host_limit_learned{host="http://up:9000",kind="rate"} 15.25
levee_host_limit_learned{host="http://up:9000",kind="inflight"} 10
levee_build_info{go_version="go1.26.8",version="v1.2.3"} 1
`
)

// jobDoc is one job of /-/jobs.
func jobDoc(id, state string) string {
	when := `"next_attempt_at":"2026-01-02T03:04:05Z"`
	lastErr := ""
	if state == "dead" {
		when = `"finished_at":"2026-01-02T03:05:00Z"`
		lastErr = `,"last_error":"503 Service Unavailable\nafter 5 attempts"`
	}
	return fmt.Sprintf(`{"id":%q,"route":"comments","method":"POST","state":%q,"attempts":5,"created_at":"2026-01-02T03:00:00Z",%s%s}`, id, state, when, lastErr)
}

func reply(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ct := "application/json"
		if status >= 400 {
			ct = "application/problem+json"
		}
		w.Header().Set("Content-Type", ct)
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

func problemDoc(status int, title, detail string) string {
	return fmt.Sprintf(`{"type":"about:blank","title":%q,"status":%d,"detail":%q,"instance":"/"}`, title, status, detail)
}

// jobsPages answers GET /-/jobs from ids, at most 2 a page whatever the
// limit asked (a node may answer fewer), with the next cursor.
func jobsPages(ids ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		limit, _ := strconv.Atoi(q.Get("limit"))
		start := 0
		for i, id := range ids {
			if id == q.Get("after") {
				start = i + 1
			}
		}
		end := min(len(ids), start+min(limit, 2))
		var docs []string
		for _, id := range ids[start:end] {
			docs = append(docs, jobDoc(id, q.Get("state")))
		}
		next := ""
		if end < len(ids) {
			next = ids[end-1]
		}
		reply(200, fmt.Sprintf(`{"jobs":[%s],"next":%q}`, strings.Join(docs, ","), next))(w, r)
	}
}

// call is one request the fake node received.
type call struct{ line, auth string }

// fakeNode plays a node's admin API: each "METHOD /path" answers with its
// handler, anything else 404 as the node does; every request is recorded.
func fakeNode(t *testing.T, routes map[string]http.HandlerFunc) (*httptest.Server, func() []call) {
	t.Helper()
	var mu sync.Mutex
	var calls []call
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		line := r.Method + " " + r.URL.EscapedPath()
		mu.Lock()
		calls = append(calls, call{line: line + querySuffix(r.URL.Query()), auth: r.Header.Get("Authorization")})
		mu.Unlock()
		if h, ok := routes[line]; ok {
			h(w, r)
			return
		}
		reply(404, problemDoc(404, "not found", "not found: "+line))(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []call {
		mu.Lock()
		defer mu.Unlock()
		return append([]call(nil), calls...)
	}
}

func querySuffix(q url.Values) string {
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

func indented(t *testing.T, doc string) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Indent(&b, []byte(doc), "", "  "); err != nil {
		t.Fatal(err)
	}
	return b.String() + "\n"
}

// statusNode answers everything levee status reads.
func statusNode() map[string]http.HandlerFunc {
	return map[string]http.HandlerFunc{
		"GET /-/cluster":  reply(200, clusterDoc),
		"GET /-/readyz":   reply(200, readyDoc),
		"GET /-/breakers": reply(200, breakersDoc),
		"GET /metrics":    reply(200, metricsDoc),
	}
}

// TestAdminCommands runs each command against a fake node: the calls it
// makes (method, path, query, token), what it prints in table and -json
// modes, and its exit code.
func TestAdminCommands(t *testing.T) {
	token := map[string]string{"LEVEE_ADMIN_TOKEN": "tok"}
	notReady := statusNode()
	notReady["GET /-/readyz"] = reply(503, problemDoc(503, "not ready", "not on the ring yet"))
	noQueue := statusNode()
	noQueue["GET /metrics"] = reply(200, "levee_cache_entries 3\n")
	tests := []struct {
		name       string
		args       []string
		env        map[string]string
		node       map[string]http.HandlerFunc
		wantCode   int
		wantCalls  []string
		wantStdout string // exact, when set
		wantHas    []string
		wantStderr string
	}{
		{name: "members", args: []string{"members"}, node: map[string]http.HandlerFunc{"GET /-/cluster": reply(200, clusterDoc)},
			wantCalls: []string{"GET /-/cluster"}, wantStdout: "" +
				"NAME  STATE  HTTP            RING   RAFT\n" +
				"n1    alive  127.0.0.1:8080  50.0%  leader\n" +
				"n2    dead   127.0.0.1:8081  50.0%  voter\n" +
				"n3    -      -               -      voter\n"},
		{name: "members sends a token it has", args: []string{"members"}, env: token,
			node: map[string]http.HandlerFunc{"GET /-/cluster": reply(200, clusterDoc)}, wantCalls: []string{"GET /-/cluster"}},
		{name: "members -json", args: []string{"members", "-json"}, node: map[string]http.HandlerFunc{"GET /-/cluster": reply(200, clusterDoc)},
			wantCalls: []string{"GET /-/cluster"}, wantStdout: "json:" + clusterDoc},
		{name: "breakers", args: []string{"breakers"}, node: map[string]http.HandlerFunc{"GET /-/breakers": reply(200, breakersDoc)},
			wantCalls: []string{"GET /-/breakers"}, wantStdout: "" +
				"ROUTE     STATE      FAILURES  HALF-OPEN IN  PROBER  FORCED\n" +
				"comments  open       3         12.5s         -       -\n" +
				"users     half-open  0         -             n2      -\n" +
				"orders    open       0         -             -       yes\n"},
		{name: "breakers json flag", args: []string{"breakers", "-json"}, node: map[string]http.HandlerFunc{"GET /-/breakers": reply(200, breakersDoc)},
			wantCalls: []string{"GET /-/breakers"}, wantStdout: "json:" + breakersDoc},
		{name: "status", args: []string{"status"}, node: statusNode(),
			wantCalls: []string{"GET /-/cluster", "GET /-/readyz", "GET /-/breakers", "GET /metrics"}, wantStdout: "" +
				"node      n1 (127.0.0.1:8080)\n" +
				"leader    n1\n" +
				"term      4\n" +
				"health    ready; quorum reachable\n" +
				"members   2 (1 alive, 1 dead)\n" +
				"breakers  3 of 3 not closed: comments open, users half-open, orders open\n" +
				"queue     5 waiting (2 queued, 3 delayed, 0 running), 1 dead, oldest 12s\n" +
				"limit     http://other:9000: rate 16.7/s, inflight 32\n" +
				"limit     http://up:9000: rate 12.5/s, inflight 8; last 429/503 at rate 15.3/s, inflight 10\n"},
		{name: "status not ready, no queue", args: []string{"status"}, node: noQueueNotReady(notReady, noQueue),
			wantHas: []string{"health    not ready: not on the ring yet; quorum reachable\n"}},
		{name: "status without a queue", args: []string{"status"}, node: noQueue,
			wantHas: []string{"breakers  3 of 3"}},
		{name: "status -json", args: []string{"status", "-json"}, node: statusNode(),
			wantHas: []string{`"cluster": {`, `"readyz": {`, `"breakers": [`, `"queue": {`, `"oldest_job_age_seconds": 12.2`, `"queued": 2`,
				`"hosts": [`, `"host": "http://up:9000"`, `"learned": {`}},
		{name: "owner", args: []string{"owner", "/comments/x?a=1", "-tenant", "acme"}, node: map[string]http.HandlerFunc{"GET /-/cluster/owner": reply(200, ownerDoc)},
			wantCalls:  []string{"GET /-/cluster/owner?path=%2Fcomments%2Fx%3Fa%3D1&tenant=acme"},
			wantStdout: "route     comments\nowner     n2\nreplicas  n2, n3\n"},
		{name: "owner, empty tenant", args: []string{"owner", "-tenant=", "/comments/x"}, node: map[string]http.HandlerFunc{"GET /-/cluster/owner": reply(200, ownerDoc)},
			wantCalls: []string{"GET /-/cluster/owner?path=%2Fcomments%2Fx&tenant="}},
		{name: "owner without tenant", args: []string{"owner", "/comments/x", "-json"}, node: map[string]http.HandlerFunc{"GET /-/cluster/owner": reply(200, ownerDoc)},
			wantCalls: []string{"GET /-/cluster/owner?path=%2Fcomments%2Fx"}, wantStdout: "json:" + ownerDoc},
		{name: "owner without a path", args: []string{"owner"}, wantCode: 2, wantStderr: "usage: levee owner"},
		{name: "breaker open", args: []string{"breaker", "open", "comments"}, env: token,
			node:      map[string]http.HandlerFunc{"POST /-/breakers/comments/open": reply(200, `{"route":"comments","action":"open","status":"committed"}`)},
			wantCalls: []string{"POST /-/breakers/comments/open"}, wantStdout: "breaker comments open: committed\n"},
		{name: "breaker close -json", args: []string{"breaker", "-json", "close", "comments"}, env: token,
			node:      map[string]http.HandlerFunc{"POST /-/breakers/comments/close": reply(200, `{"route":"comments","action":"close","status":"committed"}`)},
			wantCalls: []string{"POST /-/breakers/comments/close"}, wantStdout: "json:" + `{"route":"comments","action":"close","status":"committed"}`},
		{name: "breaker bad action", args: []string{"breaker", "toggle", "comments"}, env: token, wantCode: 2, wantStderr: "open|close ROUTE"},
		{name: "breaker without a token", args: []string{"breaker", "open", "comments"}, wantCode: 2, wantStderr: "no admin token"},
		{name: "purge a path", args: []string{"purge", "/comments/stories/1", "-tenant", "acme"}, env: token,
			node:      map[string]http.HandlerFunc{"DELETE /-/cache": reply(200, `{"purged":4}`)},
			wantCalls: []string{"DELETE /-/cache?path=%2Fcomments%2Fstories%2F1&tenant=acme"}, wantStdout: "purged 4\n"},
		{name: "purge a route", args: []string{"purge", "-route", "comments"}, env: token,
			node:      map[string]http.HandlerFunc{"DELETE /-/cache": reply(200, `{"purged":120}`)},
			wantCalls: []string{"DELETE /-/cache?route=comments"}, wantStdout: "purged 120\n"},
		{name: "purge -json", args: []string{"purge", "-json", "/comments/x"}, env: token,
			node:      map[string]http.HandlerFunc{"DELETE /-/cache": reply(200, `{"purged":0}`)},
			wantCalls: []string{"DELETE /-/cache?path=%2Fcomments%2Fx"}, wantStdout: "json:" + `{"purged":0}`},
		{name: "purge path and route", args: []string{"purge", "/x", "-route", "comments"}, env: token, wantCode: 2, wantStderr: "not both"},
		{name: "purge route with tenant", args: []string{"purge", "-route", "comments", "-tenant", "a"}, env: token, wantCode: 2, wantStderr: "-tenant goes with PATH"},
		{name: "purge nothing", args: []string{"purge"}, env: token, wantCode: 2, wantStderr: "usage: levee purge"},
		{name: "purge answer without a count", args: []string{"purge", "/x"}, env: token,
			node: map[string]http.HandlerFunc{"DELETE /-/cache": reply(200, `{}`)}, wantCode: 1, wantStderr: `no "purged" count`},
		{name: "jobs follow next", args: []string{"jobs", "-state", "dead"}, env: token, node: map[string]http.HandlerFunc{"GET /-/jobs": jobsPages("j1", "j2", "j3")},
			wantCalls: []string{"GET /-/jobs?limit=100&state=dead", "GET /-/jobs?after=j2&limit=100&state=dead"}, wantStdout: "" +
				"ID  ROUTE     METHOD  STATE  ATTEMPTS  NEXT / FINISHED                LAST ERROR\n" +
				"j1  comments  POST    dead   5         finished 2026-01-02T03:05:00Z  503 Service Unavailable\n" +
				"j2  comments  POST    dead   5         finished 2026-01-02T03:05:00Z  503 Service Unavailable\n" +
				"j3  comments  POST    dead   5         finished 2026-01-02T03:05:00Z  503 Service Unavailable\n"},
		{name: "jobs up to -limit", args: []string{"jobs", "-limit", "1", "-state", "queued"}, env: token, node: map[string]http.HandlerFunc{"GET /-/jobs": jobsPages("j1", "j2", "j3")},
			wantCalls: []string{"GET /-/jobs?limit=1&state=queued"},
			wantHas:   []string{"j1  comments  POST    queued  5         next 2026-01-02T03:04:05Z  -\n"}, wantStderr: "levee jobs -after j1"},
		{name: "jobs -after", args: []string{"jobs", "-after", "j2"}, env: token, node: map[string]http.HandlerFunc{"GET /-/jobs": jobsPages("j1", "j2", "j3")},
			wantCalls: []string{"GET /-/jobs?after=j2&limit=100"}},
		{name: "jobs -json joins the pages", args: []string{"jobs", "-json", "-state", "dead"}, env: token, node: map[string]http.HandlerFunc{"GET /-/jobs": jobsPages("j1", "j2", "j3")},
			wantStdout: "json:" + `{"jobs":[` + jobDoc("j1", "dead") + "," + jobDoc("j2", "dead") + "," + jobDoc("j3", "dead") + `]}`},
		{name: "no jobs", args: []string{"jobs"}, env: token, node: map[string]http.HandlerFunc{"GET /-/jobs": jobsPages()}, wantStdout: "no jobs\n"},
		{name: "jobs negative limit", args: []string{"jobs", "-limit", "-1"}, env: token, wantCode: 2, wantStderr: "-limit"},
		{name: "job replay", args: []string{"job", "replay", "abc123"}, env: token,
			node:      map[string]http.HandlerFunc{"POST /-/jobs/abc123/replay": reply(200, `{"id":"abc123","state":"queued"}`)},
			wantCalls: []string{"POST /-/jobs/abc123/replay"}, wantStdout: "job abc123 replayed: queued\n"},
		{name: "job replay of a live job", args: []string{"job", "replay", "abc123"}, env: token,
			node:     map[string]http.HandlerFunc{"POST /-/jobs/abc123/replay": reply(409, problemDoc(409, "conflict", "job abc123 is queued; only a dead job is replayed"))},
			wantCode: 1, wantStderr: "levee job: 409 Conflict: job abc123 is queued; only a dead job is replayed"},
		{name: "job without replay", args: []string{"job", "abc123"}, env: token, wantCode: 2, wantStderr: "want replay ID"},
		{name: "leave -json", args: []string{"leave", "-json"}, env: token, node: map[string]http.HandlerFunc{"POST /-/leave": reply(200, `{"node":"n2","status":"left; stopping"}`)},
			wantCalls: []string{"POST /-/leave"}, wantStdout: "json:" + `{"node":"n2","status":"left; stopping"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, calls := fakeNode(t, tt.node)
			e := map[string]string{"LEVEE_ADDR": strings.TrimPrefix(srv.URL, "http://")}
			for k, v := range tt.env {
				e[k] = v
			}
			var stdout, stderr bytes.Buffer
			if code := runTo(tt.args, env(e), &stdout, &stderr); code != tt.wantCode {
				t.Fatalf("exit code = %d, want %d; stderr: %s", code, tt.wantCode, &stderr)
			}
			got := calls()
			if tt.wantCalls != nil {
				var lines []string
				for _, c := range got {
					lines = append(lines, c.line)
				}
				if strings.Join(lines, "\n") != strings.Join(tt.wantCalls, "\n") {
					t.Fatalf("calls:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(tt.wantCalls, "\n"))
				}
			}
			wantAuth := "" // the token, on every call, when there is one
			if tok := e["LEVEE_ADMIN_TOKEN"]; tok != "" {
				wantAuth = "Bearer " + tok
			}
			for _, c := range got {
				if c.auth != wantAuth {
					t.Fatalf("%s: Authorization = %q, want %q", c.line, c.auth, wantAuth)
				}
			}
			want := tt.wantStdout
			if doc, ok := strings.CutPrefix(want, "json:"); ok {
				want = indented(t, doc)
			}
			if want != "" && stdout.String() != want {
				t.Fatalf("stdout:\n%s\nwant:\n%s", &stdout, want)
			}
			for _, h := range tt.wantHas {
				if !strings.Contains(stdout.String(), h) {
					t.Fatalf("stdout lacks %q:\n%s", h, &stdout)
				}
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Fatalf("stderr lacks %q: %s", tt.wantStderr, &stderr)
			}
		})
	}
}

func noQueueNotReady(notReady, noQueue map[string]http.HandlerFunc) map[string]http.HandlerFunc {
	notReady["GET /metrics"] = noQueue["GET /metrics"]
	return notReady
}

// TestAdminCommandFailures: whatever the command, a node's refusal
// (401, 404, 503) exits 1 with the problem's detail, and a node that
// cannot be reached exits 3.
func TestAdminCommandFailures(t *testing.T) {
	commands := [][]string{
		{"status"}, {"members"}, {"breakers"}, {"breaker", "open", "comments"}, {"owner", "/comments/x"},
		{"purge", "/comments/x"}, {"purge", "-route", "comments"}, {"jobs"}, {"job", "replay", "j1"},
		{"leave"}, {"remove", "n3"},
	}
	statuses := []struct {
		status        int
		title, detail string
	}{
		{401, "unauthorized", "the request does not carry a valid token"},
		{404, "not found", "not found: route \"comments\""},
		{503, "cluster unavailable", "no Raft leader is known; retry"},
	}
	dead := freeAddr(t) // nothing listens there any more
	for _, args := range commands {
		for _, st := range statuses {
			t.Run(fmt.Sprintf("%s %d", strings.Join(args, " "), st.status), func(t *testing.T) {
				srv := httptest.NewServer(reply(st.status, problemDoc(st.status, st.title, st.detail)))
				defer srv.Close()
				var stdout, stderr bytes.Buffer
				code := runTo(args, env(map[string]string{"LEVEE_ADDR": srv.URL, "LEVEE_ADMIN_TOKEN": "tok"}), &stdout, &stderr)
				if code != exitAnswered {
					t.Fatalf("exit code = %d, want 1; stderr: %s", code, &stderr)
				}
				if !strings.Contains(stderr.String(), strconv.Itoa(st.status)) || !strings.Contains(stderr.String(), st.detail) {
					t.Fatalf("stderr does not give the status and detail: %s", &stderr)
				}
				if stdout.Len() != 0 {
					t.Fatalf("stdout = %q, want nothing", &stdout)
				}
			})
		}
		t.Run(strings.Join(args, " ")+" unreachable", func(t *testing.T) {
			var stderr bytes.Buffer
			code := runTo(append(args, "-addr", dead), env(map[string]string{"LEVEE_ADMIN_TOKEN": "tok"}), io.Discard, &stderr)
			if code != exitUnreachable || !strings.Contains(stderr.String(), "node unreachable") {
				t.Fatalf("exit code = %d, want 3; stderr: %s", code, &stderr)
			}
		})
	}
}

func TestTokenFromFileWinsOverEnv(t *testing.T) {
	srv, calls := fakeNode(t, map[string]http.HandlerFunc{"DELETE /-/cache": reply(200, `{"purged":1}`)})
	file := writeConfig(t, "  from-file \n")
	args := []string{"purge", "-addr", srv.URL + "/", "-token-file", file, "/x"}
	if code := runTo(args, env(map[string]string{"LEVEE_ADMIN_TOKEN": "from-env"}), io.Discard, io.Discard); code != 0 {
		t.Fatalf("exit code = %d", code)
	}
	if got := calls(); len(got) != 1 || got[0].auth != "Bearer from-file" {
		t.Fatalf("calls = %+v, want one with Bearer from-file", got)
	}
	var stderr bytes.Buffer
	if code := runTo([]string{"purge", "-token-file", file + ".missing", "/x"}, env(nil), io.Discard, &stderr); code != 2 {
		t.Fatalf("missing token file: exit code = %d, want 2; stderr %s", code, &stderr)
	}
}

// TestUsageTexts: every command has a usage text naming its exit codes,
// printed by levee help CMD (stdout, 0) and levee CMD -h (stderr, 0); an
// unknown command prints the command list and exits 2.
func TestUsageTexts(t *testing.T) {
	for _, c := range commands() {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := runTo([]string{"help", c.name}, env(nil), &stdout, &stderr); code != 0 {
				t.Fatalf("levee help %s: exit %d", c.name, code)
			}
			if !strings.HasPrefix(stdout.String(), "usage: levee "+c.name) || (c.name != "help" && !strings.Contains(stdout.String(), "Exit codes")) {
				t.Fatalf("levee help %s:\n%s", c.name, &stdout)
			}
			stdout.Reset()
			if code := runTo([]string{c.name, "-h"}, env(nil), &stdout, &stderr); code != 0 {
				t.Fatalf("levee %s -h: exit %d; stderr %s", c.name, code, &stderr)
			}
			if !strings.Contains(stdout.String()+stderr.String(), "usage: levee "+c.name) {
				t.Fatalf("levee %s -h printed:\n%s%s", c.name, &stdout, &stderr)
			}
		})
	}
	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     string
	}{
		{"command list", []string{"help"}, 0, "purge "},
		{"unknown command", []string{"stats"}, 2, `unknown command "stats"`},
		{"unknown command lists the commands", []string{"stats"}, 2, "  breakers  every route's circuit breaker"},
		{"help for an unknown command", []string{"help", "stats"}, 2, "Commands:"},
		{"node help lists the commands", []string{"-h"}, 0, "  status "},
		{"unknown flag", []string{"members", "-nope"}, 2, "flag provided but not defined"},
		{"extra argument", []string{"members", "n1"}, 2, `unexpected argument "n1"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			if code := runTo(tt.args, env(nil), &out, &out); code != tt.wantCode {
				t.Fatalf("exit code = %d, want %d; output %s", code, tt.wantCode, &out)
			}
			if !strings.Contains(out.String(), tt.want) {
				t.Fatalf("output lacks %q:\n%s", tt.want, &out)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	withHealthzVersion := map[string]http.HandlerFunc{"GET /-/healthz": reply(200, `{"status":"ok","node":"n1","version":"v9.9.9"}`)}
	fromMetrics := map[string]http.HandlerFunc{"GET /-/healthz": reply(200, `{"status":"ok","node":"n1"}`), "GET /metrics": reply(200, metricsDoc)}
	unreported := map[string]http.HandlerFunc{"GET /-/healthz": reply(200, `{"status":"ok","node":"n1"}`)}
	tests := []struct {
		name      string
		node      map[string]http.HandlerFunc
		ask       bool
		extra     []string
		wantCalls int
		want      string // the node's line
	}{
		{name: "local only", node: withHealthzVersion},
		{name: "healthz reports it", node: withHealthzVersion, ask: true, wantCalls: 1, want: "node n1 at http://127.0.0.1:"},
		{name: "build info reports it", node: fromMetrics, ask: true, wantCalls: 2, want: ": levee v1.2.3\n"},
		{name: "not reported", node: unreported, ask: true, wantCalls: 2},
		{name: "json", node: fromMetrics, ask: true, extra: []string{"-json"}, wantCalls: 2, want: `"version": "v1.2.3"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, calls := fakeNode(t, tt.node)
			e := map[string]string{}
			if tt.ask {
				e["LEVEE_ADDR"] = srv.URL
			}
			var stdout, stderr bytes.Buffer
			if code := runTo(append([]string{"version"}, tt.extra...), env(e), &stdout, &stderr); code != 0 {
				t.Fatalf("exit code = %d; stderr %s", code, &stderr)
			}
			if !strings.Contains(stdout.String(), "dev") || !strings.Contains(stdout.String(), "go1.") {
				t.Fatalf("stdout lacks the local version: %s", &stdout)
			}
			if n := len(calls()); n != tt.wantCalls {
				t.Fatalf("%d calls, want %d", n, tt.wantCalls)
			}
			if tt.want == "" && strings.Contains(stdout.String(), "node n1") {
				t.Fatalf("printed a node line with no version: %s", &stdout)
			}
			if !strings.Contains(stdout.String(), tt.want) {
				t.Fatalf("stdout lacks %q: %s", tt.want, &stdout)
			}
		})
	}
	var stdout, stderr bytes.Buffer
	if code := runTo([]string{"version", "-addr", freeAddr(t)}, env(nil), &stdout, &stderr); code != exitUnreachable || !strings.Contains(stdout.String(), "levee dev") {
		t.Fatalf("unreachable -addr: exit %d, stdout %q, want 3 after the local version", code, &stdout)
	}
}

func TestParseInterleaved(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantRest   string
		wantTenant string
	}{
		{"flag after", []string{"/x", "-tenant", "a"}, "/x", "a"},
		{"flag before", []string{"-tenant", "a", "/x"}, "/x", "a"},
		{"two positionals around", []string{"open", "-tenant=a", "r"}, "open r", "a"},
		{"after --", []string{"-tenant", "a", "--", "-x", "-tenant"}, "-x -tenant", "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			tenant := fs.String("tenant", "", "")
			rest, err := parseInterleaved(fs, tt.args)
			if err != nil || strings.Join(rest, " ") != tt.wantRest || *tenant != tt.wantTenant {
				t.Fatalf("rest %q, tenant %q, err %v; want %q, %q", rest, *tenant, err, tt.wantRest, tt.wantTenant)
			}
		})
	}
}

func TestScrape(t *testing.T) {
	text := []byte(`# HELP x y
levee_x{a="1",b="q\"uo,te}"} 2.5
levee_x 7 1712000000
levee_y{a="1"} 3
levee_x{broken 1
`)
	got := scrape(text, "levee_x")
	if len(got) != 2 || got[0].labels["b"] != `q"uo,te}` || got[0].value != 2.5 || got[1].value != 7 || len(got[1].labels) != 0 {
		t.Fatalf("scrape = %+v", got)
	}
	if q := queueFromMetrics([]byte("levee_cache_entries 1\n")); q != nil {
		t.Fatalf("no queue gauges: queue %+v, want nil", q)
	}
}
