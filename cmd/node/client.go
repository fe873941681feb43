package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// The one HTTP client of the operator commands: every command that asks a
// node something goes through adminClient, and `levee health` through the
// same transport.

// Exit codes of every command, written in each usage text and the README.
const (
	exitOK          = 0 // done
	exitAnswered    = 1 // the node answered with an error (4xx/5xx), or a command failed
	exitUsage       = 2 // a usage error or a bad config file
	exitUnreachable = 3 // the node could not be reached, or did not answer within -timeout
)

// exitCodesText closes every admin command's usage text.
const exitCodesText = `
Exit codes: 0 done, 1 the node answered an error (4xx/5xx: its problem is
printed), 2 usage or config error, 3 the node could not be reached.
`

// maxAnswer bounds what the CLI reads of one answer: a page of jobs with
// their kept answers is the largest document a node sends.
const maxAnswer = 32 << 20

// errUnreachable: the request got no answer at all (refused, no route,
// timed out): exit 3.
var errUnreachable = errors.New("node unreachable")

// problemError is a node's answer other than 2xx: exit 1. Title and
// Detail come from its problem+json body when it has one.
type problemError struct {
	Method, Path string
	Status       string // "404 Not Found"
	Code         int
	Title        string
	Detail       string
	Body         []byte
}

func (e *problemError) Error() string {
	if e.Title == "" && e.Detail == "" {
		return fmt.Sprintf("%s %s answered %s with no JSON body", e.Method, e.Path, e.Status)
	}
	// The title often repeats the status ("not found") or opens the
	// detail: print each thing once.
	parts := []string{e.Status}
	if t := strings.ToLower(e.Title); t != "" && !strings.HasSuffix(strings.ToLower(e.Status), t) && !strings.HasPrefix(strings.ToLower(e.Detail), t) {
		parts = append(parts, e.Title)
	}
	if e.Detail != "" {
		parts = append(parts, e.Detail)
	}
	return strings.Join(parts, ": ")
}

// exitCode is the exit code of a command that failed with err.
func exitCode(err error) int {
	if errors.Is(err, errUnreachable) {
		return exitUnreachable
	}
	return exitAnswered
}

// newHTTPClient is the client of a short-lived process: no connection is
// kept alive, so nothing lingers behind the answer (and the shared default
// transport's pool is left alone).
func newHTTPClient(timeout time.Duration) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DisableKeepAlives = true
	return &http.Client{Timeout: timeout, Transport: tr}
}

// adminClient is the part of the CLI that talks to a node's admin API.
type adminClient struct {
	addr  string // base URL, e.g. http://127.0.0.1:8080
	token string // "" sends no Authorization
	http  *http.Client
}

// call sends one admin request and returns the body of a 2xx answer. Any
// other answer is a *problemError; no answer wraps errUnreachable.
func (c *adminClient) call(method, path string, query url.Values) ([]byte, error) {
	target := c.addr + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(context.Background(), method, target, nil)
	if err != nil {
		return nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errUnreachable, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return nil, fmt.Errorf("%w: reading the answer to %s %s: %w", errUnreachable, method, path, err)
	}
	if len(body) > maxAnswer {
		return nil, fmt.Errorf("%s %s: answer larger than %d MiB", method, path, maxAnswer>>20)
	}
	if resp.StatusCode/100 != 2 {
		return nil, answered(method, path, resp, body)
	}
	return body, nil
}

// answered reads a refusal's problem+json body into a problemError.
func answered(method, path string, resp *http.Response, body []byte) error {
	e := &problemError{Method: method, Path: path, Status: resp.Status, Code: resp.StatusCode, Body: body}
	var p struct{ Title, Detail string }
	if json.Unmarshal(body, &p) == nil {
		e.Title, e.Detail = p.Title, p.Detail
	}
	return e
}

// getJSON is call decoding a JSON answer into out; it returns the raw
// answer too, which -json prints as is.
func (c *adminClient) getJSON(method, path string, query url.Values, out any) ([]byte, error) {
	body, err := c.call(method, path, query)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(body, out); err != nil {
		return nil, fmt.Errorf("%s %s: the answer is not the expected JSON: %w", method, path, err)
	}
	return body, nil
}

// cliEnv is what every command is handed: the environment and where to
// write.
type cliEnv struct {
	getenv         func(string) string
	stdout, stderr io.Writer
}

// adminCmd is one admin command's flag set: -addr, -token-file, -timeout
// and -json, plus whatever the command registers on fs before parse.
type adminCmd struct {
	name, usage string
	fs          *flag.FlagSet
	json        *bool
	addr        *string
	tokenFile   *string
	timeout     *time.Duration
	env         cliEnv
}

func newAdminCmd(name, usage string, e cliEnv) *adminCmd {
	fs := flag.NewFlagSet("levee "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() { fmt.Fprint(e.stderr, usage) }
	return &adminCmd{
		name: name, usage: usage, fs: fs, env: e,
		addr:      fs.String("addr", envOr(e.getenv, "LEVEE_ADDR", "127.0.0.1:8080"), "node to ask, host:port or URL (env LEVEE_ADDR)"),
		tokenFile: fs.String("token-file", "", "file holding the admin token (default: env LEVEE_ADMIN_TOKEN)"),
		timeout:   fs.Duration("timeout", 30*time.Second, "how long to wait for each answer"),
		json:      fs.Bool("json", false, "print the node's JSON answer"),
	}
}

// parse parses args, flags and positional arguments in any order, checks
// the positional ones with want (nil: none allowed), and builds the
// client; needToken refuses to go on without an admin token. ok false
// carries the exit code (0 for -h).
func (c *adminCmd) parse(args []string, needToken bool, want func(rest []string) error) (cl *adminClient, rest []string, code int, ok bool) {
	rest, err := parseInterleaved(c.fs, args)
	if err != nil {
		return nil, nil, usageCode(err), false
	}
	if want == nil {
		want = noArgs
	}
	if err := want(rest); err != nil {
		return nil, nil, c.usageErr("%v", err), false
	}
	cl, err = c.client(needToken)
	if err != nil {
		fmt.Fprintf(c.env.stderr, "levee %s: %v\n", c.name, err)
		return nil, nil, exitUsage, false
	}
	return cl, rest, exitOK, true
}

func noArgs(rest []string) error {
	if len(rest) > 0 {
		return fmt.Errorf("unexpected argument %q", rest[0])
	}
	return nil
}

// oneArg wants exactly one positional argument, named what.
func oneArg(what string) func([]string) error {
	return func(rest []string) error {
		if len(rest) != 1 {
			return fmt.Errorf("want one %s, got %d arguments", what, len(rest))
		}
		return nil
	}
}

func (c *adminCmd) client(needToken bool) (*adminClient, error) {
	token := c.env.getenv("LEVEE_ADMIN_TOKEN")
	if *c.tokenFile != "" {
		b, err := os.ReadFile(*c.tokenFile)
		if err != nil {
			return nil, err
		}
		token = strings.TrimSpace(string(b))
	}
	if token == "" && needToken {
		return nil, errors.New("no admin token: set LEVEE_ADMIN_TOKEN or pass -token-file")
	}
	base := strings.TrimRight(*c.addr, "/")
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	return &adminClient{addr: base, token: token, http: newHTTPClient(*c.timeout)}, nil
}

// usageErr prints what is wrong and the usage text: exit 2.
func (c *adminCmd) usageErr(format string, args ...any) int {
	fmt.Fprintf(c.env.stderr, "levee %s: %s\n\n%s", c.name, fmt.Sprintf(format, args...), c.usage)
	return exitUsage
}

// fail prints err and returns its exit code.
func (c *adminCmd) fail(err error) int {
	fmt.Fprintf(c.env.stderr, "levee %s: %v\n", c.name, err)
	return exitCode(err)
}

// printJSON prints a node's JSON answer indented, as -json does.
func (c *adminCmd) printJSON(raw []byte) int {
	var buf bytes.Buffer
	if err := json.Indent(&buf, bytes.TrimSpace(raw), "", "  "); err != nil {
		return c.fail(fmt.Errorf("the answer is not JSON: %w", err))
	}
	buf.WriteByte('\n')
	_, _ = c.env.stdout.Write(buf.Bytes())
	return exitOK
}

// parseInterleaved parses fs over args where flags may follow positional
// arguments (levee owner /x -tenant t), and returns the positional ones.
// After "--" everything is positional.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		left := fs.Args()
		if len(left) == 0 {
			return rest, nil
		}
		if consumed := len(args) - len(left); consumed > 0 && args[consumed-1] == "--" {
			return append(rest, left...), nil
		}
		rest = append(rest, left[0])
		args = left[1:]
	}
}

func envOr(getenv func(string) string, key, def string) string {
	if v := getenv(key); v != "" {
		return v
	}
	return def
}

func usageCode(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	return exitUsage
}
