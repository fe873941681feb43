package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/levee/levee/consensus"
	"github.com/levee/levee/control"
)

// The commands that give up Raft seats. A stop (SIGTERM) keeps a node's
// seat; these are the explicit, permanent ways out, and recover is the way
// back in when a configuration no majority agrees on wedged the cluster.

const leaveUsage = `usage: levee leave [-addr HOST:PORT] [-token-file FILE] [-json]

Removes the node at -addr from the cluster's Raft configuration for good,
then stops it (it also leaves gossip). Use it when a node is retired, not
for a restart: a stopped node keeps its seat and comes back by itself.
Needs the admin token (LEVEE_ADMIN_TOKEN, or -token-file).
` + adminFlagsText + exitCodesText

const removeUsage = `usage: levee remove [-addr HOST:PORT] [-token-file FILE] [-json] NODE

Asks the node at -addr to remove NODE, a member that is dead or stopped,
from the Raft configuration for good (the cluster no longer waits for it
in its quorum). A member gossip sees alive is refused: run levee leave on
it instead. Needs the admin token (LEVEE_ADMIN_TOKEN, or -token-file).
` + adminFlagsText + exitCodesText

const recoverUsage = `usage: levee recover -config FILE -voters n1=HOST:PORT,n2=HOST:PORT,...

Rewrites the Raft configuration in the node's data dir to exactly these
voters (name=raft address), keeping its committed breaker state. For a
cluster that lost its quorum or whose nodes disagree on their voters
(/-/cluster shows raft.problem). Stop every node first, run this on each
of them with the SAME -voters, then start them all. See docs/runbook.md.
Exit codes: 0 recovered, 1 failed, 2 usage.
`

func leaveCmd(args []string, e cliEnv) int {
	c := newAdminCmd("leave", leaveUsage, e)
	cl, _, code, ok := c.parse(args, true, nil)
	if !ok {
		return code
	}
	var out struct{ Node string }
	raw, err := cl.getJSON(http.MethodPost, "/-/leave", nil, &out)
	if err != nil {
		return c.fail(err)
	}
	if *c.json {
		return c.printJSON(raw)
	}
	fmt.Fprintf(e.stdout, "%s left the cluster and is stopping\n", out.Node)
	return exitOK
}

func removeCmd(args []string, e cliEnv) int {
	c := newAdminCmd("remove", removeUsage, e)
	cl, rest, code, ok := c.parse(args, true, oneArg("NODE"))
	if !ok {
		return code
	}
	raw, err := cl.call(http.MethodDelete, "/-/cluster/members/"+url.PathEscape(rest[0]), nil)
	if err != nil {
		return c.fail(err)
	}
	if *c.json {
		return c.printJSON(raw)
	}
	fmt.Fprintf(e.stdout, "%s removed from the raft configuration\n", rest[0])
	return exitOK
}

func recoverCmd(args []string, e cliEnv) int {
	getenv, stdout, stderr := e.getenv, e.stdout, e.stderr
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
	if err := control.RecoverConfig(cfg, voters, log); err != nil {
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
