package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/levee/levee/consensus"
	"github.com/levee/levee/node"
)

// The commands that give up Raft seats. A stop (SIGTERM) keeps a node's
// seat; these are the explicit, permanent ways out, and recover is the way
// back in when a configuration no majority agrees on wedged the cluster.

const leaveUsage = `usage: levee leave [-addr URL] [-token-file FILE]

Removes the node at -addr from the cluster's Raft configuration for good,
then stops it (it also leaves gossip). Use it when a node is retired, not
for a restart: a stopped node keeps its seat and comes back by itself.
Needs the admin token (LEVEE_ADMIN_TOKEN, or -token-file).
Exit codes: 0 left, 1 refused or failed, 2 usage.
`

const removeUsage = `usage: levee remove [-addr URL] [-token-file FILE] NODE

Asks the node at -addr to remove NODE, a member that is dead or stopped,
from the Raft configuration for good (the cluster no longer waits for it
in its quorum). A member gossip sees alive is refused: run levee leave on
it instead. Needs the admin token (LEVEE_ADMIN_TOKEN, or -token-file).
Exit codes: 0 removed, 1 refused or failed, 2 usage.
`

const recoverUsage = `usage: levee recover -config FILE -voters n1=HOST:PORT,n2=HOST:PORT,...

Rewrites the Raft configuration in the node's data dir to exactly these
voters (name=raft address), keeping its committed breaker state. For a
cluster that lost its quorum or whose nodes disagree on their voters
(/-/cluster shows raft.problem). Stop every node first, run this on each
of them with the SAME -voters, then start them all. See docs/runbook.md.
Exit codes: 0 recovered, 1 failed, 2 usage.
`

// adminClient is the part of the CLI that talks to a node's admin API.
type adminClient struct {
	addr  string
	token string
	http  *http.Client
}

// adminFlags registers -addr and -token-file on fs; call done after Parse.
func adminFlags(fs *flag.FlagSet, getenv func(string) string) func() (*adminClient, error) {
	addr := fs.String("addr", envOr(getenv, "LEVEE_ADDR", "http://127.0.0.1:8080"), "node to ask (env LEVEE_ADDR)")
	tokenFile := fs.String("token-file", "", "file holding the admin token (default: env LEVEE_ADMIN_TOKEN)")
	timeout := fs.Duration("timeout", 30*time.Second, "how long to wait for the answer")
	return func() (*adminClient, error) {
		token := getenv("LEVEE_ADMIN_TOKEN")
		if *tokenFile != "" {
			b, err := os.ReadFile(*tokenFile)
			if err != nil {
				return nil, err
			}
			token = strings.TrimSpace(string(b))
		}
		if token == "" {
			return nil, errors.New("no admin token: set LEVEE_ADMIN_TOKEN or pass -token-file")
		}
		base := strings.TrimRight(*addr, "/")
		if !strings.Contains(base, "://") {
			base = "http://" + base
		}
		return &adminClient{addr: base, token: token, http: &http.Client{Timeout: *timeout}}, nil
	}
}

func envOr(getenv func(string) string, key, def string) string {
	if v := getenv(key); v != "" {
		return v
	}
	return def
}

// do sends an admin call and returns the decoded JSON answer, or the
// problem's title and detail as an error.
func (c *adminClient) do(method, path string) (map[string]any, error) {
	req, err := http.NewRequestWithContext(context.Background(), method, c.addr+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&out); err != nil {
		return nil, fmt.Errorf("%s %s answered %s with no JSON body", method, path, resp.Status)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %v", resp.Status, out["detail"])
	}
	return out, nil
}

// cliCommand parses args for a one-call admin command.
func cliCommand(name, usage string, args []string, getenv func(string) string, stderr io.Writer, nargs int) (*adminClient, []string, int) {
	fs := flag.NewFlagSet("levee "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	client := adminFlags(fs, getenv)
	if err := fs.Parse(args); err != nil {
		return nil, nil, usageCode(err)
	}
	if fs.NArg() != nargs {
		fmt.Fprint(stderr, usage)
		return nil, nil, 2
	}
	c, err := client()
	if err != nil {
		fmt.Fprintf(stderr, "levee %s: %v\n", name, err)
		return nil, nil, 2
	}
	return c, fs.Args(), 0
}

func usageCode(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}

func leaveCmd(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	c, _, code := cliCommand("leave", leaveUsage, args, getenv, stderr, 0)
	if c == nil {
		return code
	}
	out, err := c.do(http.MethodPost, "/-/leave")
	if err != nil {
		fmt.Fprintf(stderr, "levee leave: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "%v left the cluster and is stopping\n", out["node"])
	return 0
}

func removeCmd(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	c, rest, code := cliCommand("remove", removeUsage, args, getenv, stderr, 1)
	if c == nil {
		return code
	}
	if _, err := c.do(http.MethodDelete, "/-/cluster/members/"+url.PathEscape(rest[0])); err != nil {
		fmt.Fprintf(stderr, "levee remove: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s removed from the raft configuration\n", rest[0])
	return 0
}

func recoverCmd(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("levee recover", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, recoverUsage) }
	var votersFlag *string
	cfg, err := loadConfigWith(fs, args, getenv, func(fs *flag.FlagSet) {
		votersFlag = fs.String("voters", "", "every voter as name=raft-address, comma-separated")
	})
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "levee recover: %v\n", err)
		return 2
	}
	voters, err := parseVoters(*votersFlag)
	if err != nil {
		fmt.Fprintf(stderr, "levee recover: %v\n\n%s", err, recoverUsage)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := node.RecoverRaft(cfg, voters, log); err != nil {
		fmt.Fprintf(stderr, "levee recover: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "recovered %s (%s): voters %s. Start every node now.\n", cfg.Node.Name, cfg.Node.DataDir, *votersFlag)
	return 0
}

// parseVoters reads "n1=host:port,n2=host:port".
func parseVoters(s string) ([]consensus.Peer, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("-voters is required")
	}
	var out []consensus.Peer
	for _, item := range strings.Split(s, ",") {
		id, addr, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("-voters: %q is not name=host:port", item)
		}
		out = append(out, consensus.Peer{ID: id, RaftAddr: addr})
	}
	return out, nil
}
