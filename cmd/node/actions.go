package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/levee/levee/api"
)

// The commands that change something (breaker, purge, job replay) and the
// job list: each is one admin call, or a paged run of them, and every one
// needs the admin token.

const breakerUsage = `usage: levee breaker [-addr HOST:PORT] [-json] open|close ROUTE

Forces ROUTE's circuit breaker open (callers get 503, or stale-if-error,
until it is closed) or closed, on every node: the command is committed
through Raft. Calls POST /-/breakers/ROUTE/open|close. Needs the admin
token. Idempotent: after a 503 (no leader), run it again.
` + adminFlagsText + exitCodesText

const purgeUsage = `usage: levee purge [-addr HOST:PORT] [-json] PATH [-tenant T]
       levee purge [-addr HOST:PORT] [-json] -route R

Removes cached answers on every node (the owner, its replicas, every near
cache), leaving tombstones so no copy comes back: every method and
variant of PATH (with its query, e.g. /comments/stories/1?a=1) for
tenant T, or everything cached for route R. Calls
DELETE /-/cache?path=PATH&tenant=T or DELETE /-/cache?route=R and prints
"purged N". Needs the admin token.

  -tenant T   the tenant header's value (with PATH)
  -route R    purge the whole route instead of one PATH
` + adminFlagsText + exitCodesText

const jobsUsage = `usage: levee jobs [-addr HOST:PORT] [-json] [-state S] [-limit N] [-after ID]

Lists the durable queue's jobs, oldest first: id, route, method, state,
attempts, next attempt (or when it finished) and the last error. Pages
through GET /-/jobs until the list ends or N jobs are printed; a list cut
by -limit ends with the -after cursor to continue from. Needs the admin
token.

  -state S    only jobs in state S: queued, delayed, running, done, dead
  -limit N    print at most N jobs (default 0: all)
  -after ID   start after job ID
` + adminFlagsText + exitCodesText

const jobUsage = `usage: levee job [-addr HOST:PORT] [-json] replay ID

replay: queues dead job ID again with its attempts reset
(POST /-/jobs/ID/replay); a job that is not dead is refused (409).
Needs the admin token.
` + adminFlagsText + exitCodesText

// jobPageSize is how many jobs one GET /-/jobs asks for: the node's
// default page, small enough that kept answers stay a modest document.
const jobPageSize = 100

func breakerCmd(args []string, e cliEnv) int {
	c := newAdminCmd("breaker", breakerUsage, e)
	cl, rest, code, ok := c.parse(args, true, func(rest []string) error {
		if len(rest) != 2 || (rest[0] != "open" && rest[0] != "close") {
			return errors.New("want open|close ROUTE")
		}
		return nil
	})
	if !ok {
		return code
	}
	action, route := rest[0], rest[1]
	var out struct{ Status string }
	raw, err := cl.getJSON(http.MethodPost, "/-/breakers/"+url.PathEscape(route)+"/"+action, nil, &out)
	if err != nil {
		return c.fail(err)
	}
	if *c.json {
		return c.printJSON(raw)
	}
	fmt.Fprintf(e.stdout, "breaker %s %s: %s\n", route, action, out.Status)
	return exitOK
}

func purgeCmd(args []string, e cliEnv) int {
	c := newAdminCmd("purge", purgeUsage, e)
	tenant := c.fs.String("tenant", "", "the tenant header's value (with PATH)")
	route := c.fs.String("route", "", "purge everything cached for this route")
	cl, rest, code, ok := c.parse(args, true, func(rest []string) error {
		switch {
		case *route != "" && len(rest) > 0:
			return errors.New("give PATH or -route, not both")
		case *route != "" && isSet(c.fs, "tenant"):
			return errors.New("-tenant goes with PATH, not -route")
		case *route == "" && len(rest) != 1:
			return errors.New("want one PATH, or -route R")
		}
		return nil
	})
	if !ok {
		return code
	}
	q := url.Values{"route": {*route}}
	if *route == "" {
		q = url.Values{"path": {rest[0]}}
		if isSet(c.fs, "tenant") {
			q.Set("tenant", *tenant)
		}
	}
	var out struct {
		Purged *int64 `json:"purged"`
	}
	raw, err := cl.getJSON(http.MethodDelete, "/-/cache", q, &out)
	if err == nil && out.Purged == nil {
		err = errors.New(`DELETE /-/cache: the answer has no "purged" count`)
	}
	if err != nil {
		return c.fail(err)
	}
	if *c.json {
		return c.printJSON(raw)
	}
	fmt.Fprintf(e.stdout, "purged %d\n", *out.Purged)
	return exitOK
}

// jobList is a run of /-/jobs pages joined: the node's job documents as
// sent, and the cursor after the last one when the list was cut.
type jobList struct {
	Jobs []json.RawMessage `json:"jobs"`
	Next string            `json:"next,omitempty"`
}

func jobsCmd(args []string, e cliEnv) int {
	c := newAdminCmd("jobs", jobsUsage, e)
	state := c.fs.String("state", "", "only jobs in this state")
	limit := c.fs.Int("limit", 0, "print at most N jobs (0: all)")
	after := c.fs.String("after", "", "start after this job id")
	cl, _, code, ok := c.parse(args, true, func(rest []string) error {
		if *limit < 0 {
			return errors.New("-limit must be 0 (all) or more")
		}
		return noArgs(rest)
	})
	if !ok {
		return code
	}
	list, err := listJobs(cl, *state, *after, *limit)
	if err != nil {
		return c.fail(err)
	}
	if *c.json {
		b, err := json.Marshal(list)
		if err != nil {
			return c.fail(err)
		}
		return c.printJSON(b)
	}
	if err := printJobs(c, list); err != nil {
		return c.fail(err)
	}
	return exitOK
}

// listJobs follows the node's next cursor until the list ends or limit
// (0: none) jobs are in.
func listJobs(cl *adminClient, state, after string, limit int) (jobList, error) {
	list := jobList{Jobs: []json.RawMessage{}}
	for {
		n := jobPageSize
		if limit > 0 {
			n = min(n, limit-len(list.Jobs))
		}
		q := url.Values{"limit": {strconv.Itoa(n)}}
		if state != "" {
			q.Set("state", state)
		}
		if after != "" {
			q.Set("after", after)
		}
		var page jobList
		if _, err := cl.getJSON(http.MethodGet, "/-/jobs", q, &page); err != nil {
			return list, err
		}
		list.Jobs = append(list.Jobs, page.Jobs...)
		list.Next = page.Next
		// A cursor that does not move would page forever.
		if page.Next == "" || page.Next == after || len(page.Jobs) == 0 || (limit > 0 && len(list.Jobs) >= limit) {
			return list, nil
		}
		after = page.Next
	}
}

func printJobs(c *adminCmd, list jobList) error {
	if len(list.Jobs) == 0 {
		fmt.Fprintln(c.env.stdout, "no jobs")
		return nil
	}
	rows := [][]string{{"ID", "ROUTE", "METHOD", "STATE", "ATTEMPTS", "NEXT / FINISHED", "LAST ERROR"}}
	for _, raw := range list.Jobs {
		var j api.JobView
		if err := json.Unmarshal(raw, &j); err != nil {
			return fmt.Errorf("GET /-/jobs: a job is not the expected JSON: %w", err)
		}
		rows = append(rows, []string{j.ID, j.Route, j.Method, string(j.State), strconv.Itoa(j.Attempts), jobWhen(j), dash(oneLine(j.LastError, 80))})
	}
	table(c.env.stdout, rows)
	if list.Next != "" {
		fmt.Fprintf(c.env.stderr, "more jobs: levee jobs -after %s\n", list.Next)
	}
	return nil
}

func jobWhen(j api.JobView) string {
	switch {
	case j.FinishedAt != nil:
		return "finished " + j.FinishedAt.UTC().Format(time.RFC3339)
	case j.NextAttemptAt != nil:
		return "next " + j.NextAttemptAt.UTC().Format(time.RFC3339)
	}
	return "-"
}

// oneLine keeps a table row on one line: s's first line, cut to n runes.
func oneLine(s string, n int) string {
	s, _, _ = strings.Cut(s, "\n")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func jobCmd(args []string, e cliEnv) int {
	c := newAdminCmd("job", jobUsage, e)
	cl, rest, code, ok := c.parse(args, true, func(rest []string) error {
		if len(rest) != 2 || rest[0] != "replay" {
			return errors.New("want replay ID")
		}
		return nil
	})
	if !ok {
		return code
	}
	var out struct{ ID, State string }
	raw, err := cl.getJSON(http.MethodPost, "/-/jobs/"+url.PathEscape(rest[1])+"/replay", nil, &out)
	if err != nil {
		return c.fail(err)
	}
	if *c.json {
		return c.printJSON(raw)
	}
	fmt.Fprintf(e.stdout, "job %s replayed: %s\n", out.ID, out.State)
	return exitOK
}
