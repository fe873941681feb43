package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/levee/levee/api"
)

// The read-only commands: what one node sees of the cluster, from
// /-/cluster, /-/readyz, /-/breakers, /-/cluster/owner and /metrics.

const statusUsage = `usage: levee status [-addr HOST:PORT] [-json]

The node's view of the cluster on one screen: its name, the Raft leader
and term, its health (readiness and quorum), members by state, breakers
not closed, the durable queue's depth when the node runs one, and the
limit it applies to each upstream host it called (the learned one for a
host with adaptive: true, with the levels its last 429 or 503 came at;
else its share of the hosts: caps). Reads GET /-/cluster, /-/readyz,
/-/breakers and /metrics (no token needed). -json prints {"cluster",
"readyz", "breakers", "queue", "hosts"}: the node's own documents as it
sent them, and the parts read from /metrics.
` + adminFlagsText + exitCodesText

const membersUsage = `usage: levee members [-addr HOST:PORT] [-json]

Every member the node knows: name, gossip state, HTTP address, share of
the ring, and Raft suffrage (leader, voter, nonvoter; "-" without Raft).
A Raft voter gossip no longer shows is listed with state "-".
Reads GET /-/cluster.
` + adminFlagsText + exitCodesText

const breakersUsage = `usage: levee breakers [-addr HOST:PORT] [-json]

Every route's circuit breaker as the node sees it: committed state,
failures in the window, seconds until half-open, the node holding the
probe, and whether an operator forced it. Reads GET /-/breakers.
` + adminFlagsText + exitCodesText

const ownerUsage = `usage: levee owner [-addr HOST:PORT] [-json] PATH [-tenant T]

Which node owns the cache key of GET PATH (with its query, e.g.
/comments/stories/1?a=1) for tenant T, and which nodes hold its
replicas. Reads GET /-/cluster/owner?path=PATH&tenant=T.

  -tenant T   the tenant header's value (routes in header mode)
` + adminFlagsText + exitCodesText

// table prints rows aligned in columns, as every human output does.
func table(w io.Writer, rows [][]string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	_ = tw.Flush()
}

func membersCmd(args []string, e cliEnv) int {
	c := newAdminCmd("members", membersUsage, e)
	cl, _, code, ok := c.parse(args, false, nil)
	if !ok {
		return code
	}
	var st api.ClusterStatus
	raw, err := cl.getJSON(http.MethodGet, "/-/cluster", nil, &st)
	if err != nil {
		return c.fail(err)
	}
	if *c.json {
		return c.printJSON(raw)
	}
	table(e.stdout, memberRows(st))
	return exitOK
}

func memberRows(st api.ClusterStatus) [][]string {
	rows := [][]string{{"NAME", "STATE", "HTTP", "RING", "RAFT"}}
	seen := map[string]bool{}
	for _, m := range st.Members {
		seen[m.Name] = true
		rows = append(rows, []string{m.Name, m.State, dash(m.HTTP), fmt.Sprintf("%.1f%%", m.Share*100), suffrage(st, m.Name, m.Raft != "")})
	}
	if st.Raft != nil {
		for _, v := range st.Raft.Voters {
			if !seen[v] {
				rows = append(rows, []string{v, "-", "-", "-", suffrage(st, v, true)})
			}
		}
	}
	return rows
}

// suffrage is a member's part in Raft, as far as this node's
// configuration says.
func suffrage(st api.ClusterStatus, name string, hasRaft bool) string {
	switch {
	case st.Raft == nil:
		return "-"
	case st.Raft.Leader == name:
		return "leader"
	case slices.Contains(st.Raft.Voters, name):
		return "voter"
	case hasRaft:
		return "nonvoter"
	}
	return "-"
}

func breakersCmd(args []string, e cliEnv) int {
	c := newAdminCmd("breakers", breakersUsage, e)
	cl, _, code, ok := c.parse(args, false, nil)
	if !ok {
		return code
	}
	var views []api.BreakerView
	raw, err := cl.getJSON(http.MethodGet, "/-/breakers", nil, &views)
	if err != nil {
		return c.fail(err)
	}
	if *c.json {
		return c.printJSON(raw)
	}
	rows := [][]string{{"ROUTE", "STATE", "FAILURES", "HALF-OPEN IN", "PROBER", "FORCED"}}
	for _, v := range views {
		halfOpen := "-"
		if v.SecondsToHalfOpen > 0 {
			halfOpen = strconv.FormatFloat(v.SecondsToHalfOpen, 'f', -1, 64) + "s"
		}
		forced := "-"
		if v.Forced {
			forced = "yes"
		}
		rows = append(rows, []string{v.Route, v.State, strconv.Itoa(v.FailuresInWindow), halfOpen, dash(v.Prober), forced})
	}
	table(e.stdout, rows)
	return exitOK
}

func ownerCmd(args []string, e cliEnv) int {
	c := newAdminCmd("owner", ownerUsage, e)
	tenant := c.fs.String("tenant", "", "the tenant header's value")
	cl, rest, code, ok := c.parse(args, false, oneArg("PATH"))
	if !ok {
		return code
	}
	q := url.Values{"path": {rest[0]}}
	if isSet(c.fs, "tenant") {
		q.Set("tenant", *tenant)
	}
	var out struct {
		Route    string   `json:"route"`
		Owner    string   `json:"owner"`
		Replicas []string `json:"replicas"`
	}
	raw, err := cl.getJSON(http.MethodGet, "/-/cluster/owner", q, &out)
	if err != nil {
		return c.fail(err)
	}
	if *c.json {
		return c.printJSON(raw)
	}
	table(e.stdout, [][]string{{"route", out.Route}, {"owner", out.Owner}, {"replicas", dash(strings.Join(out.Replicas, ", "))}})
	return exitOK
}

func statusCmd(args []string, e cliEnv) int {
	c := newAdminCmd("status", statusUsage, e)
	cl, _, code, ok := c.parse(args, false, nil)
	if !ok {
		return code
	}
	s, err := gatherStatus(cl)
	if err != nil {
		return c.fail(err)
	}
	if *c.json {
		b, err := json.Marshal(s.doc())
		if err != nil {
			return c.fail(err)
		}
		return c.printJSON(b)
	}
	table(e.stdout, s.rows())
	return exitOK
}

// nodeStatus is what levee status gathers. Only /-/cluster must answer;
// the other parts are shown when they do.
type nodeStatus struct {
	cluster    api.ClusterStatus
	clusterRaw json.RawMessage
	ready      error // nil: /-/readyz answered 200
	readyRaw   json.RawMessage
	breakers   []api.BreakerView
	brkRaw     json.RawMessage
	brkErr     error
	queue      *queueDepth // nil: the node reports no queue
	hosts      []hostLimit // nil: no host limit reported
}

func gatherStatus(cl *adminClient) (*nodeStatus, error) {
	s := &nodeStatus{}
	raw, err := cl.getJSON(http.MethodGet, "/-/cluster", nil, &s.cluster)
	if err != nil {
		return nil, err
	}
	s.clusterRaw = raw
	s.readyRaw, s.ready = cl.call(http.MethodGet, "/-/readyz", nil)
	var pe *problemError
	if errors.As(s.ready, &pe) && json.Valid(pe.Body) {
		s.readyRaw = pe.Body
	}
	s.brkRaw, s.brkErr = cl.getJSON(http.MethodGet, "/-/breakers", nil, &s.breakers)
	if text, err := cl.call(http.MethodGet, "/metrics", nil); err == nil {
		s.queue = queueFromMetrics(text)
		s.hosts = hostLimitsFromMetrics(text)
	}
	return s, nil
}

// doc is levee status -json: the node's documents as it sent them.
func (s *nodeStatus) doc() map[string]any {
	out := map[string]any{"cluster": s.clusterRaw}
	if json.Valid(s.readyRaw) {
		out["readyz"] = s.readyRaw
	}
	if s.brkErr == nil {
		out["breakers"] = s.brkRaw
	}
	if s.queue != nil {
		out["queue"] = s.queue
	}
	if s.hosts != nil {
		out["hosts"] = s.hosts
	}
	return out
}

func (s *nodeStatus) rows() [][]string {
	leader, term := "- (no raft)", "-"
	if r := s.cluster.Raft; r != nil {
		leader, term = dash(r.Leader), strconv.FormatUint(r.Term, 10)
	}
	rows := [][]string{
		{"node", fmt.Sprintf("%s (%s)", s.cluster.Node, dash(s.cluster.HTTP))},
		{"leader", leader},
		{"term", term},
		{"health", s.health()},
		{"members", s.members()},
		{"breakers", s.breakersLine()},
	}
	if s.queue != nil {
		rows = append(rows, []string{"queue", s.queue.String()})
	}
	for _, h := range s.hosts {
		rows = append(rows, []string{"limit", h.Host + ": " + h.String()})
	}
	return rows
}

func (s *nodeStatus) health() string {
	var parts []string
	var pe *problemError
	switch {
	case s.ready == nil:
		parts = append(parts, "ready")
	case errors.As(s.ready, &pe):
		parts = append(parts, "not ready: "+dash(pe.Detail))
	default:
		parts = append(parts, "readiness unknown: "+s.ready.Error())
	}
	if r := s.cluster.Raft; r != nil {
		switch {
		case r.Problem != "":
			parts = append(parts, "raft: "+r.Problem)
		case r.Healthy:
			parts = append(parts, "quorum reachable")
		default:
			parts = append(parts, "quorum not reachable")
		}
	}
	return strings.Join(parts, "; ")
}

func (s *nodeStatus) members() string {
	byState := map[string]int{}
	for _, m := range s.cluster.Members {
		byState[m.State]++
	}
	states := make([]string, 0, len(byState))
	for st, n := range byState {
		states = append(states, fmt.Sprintf("%d %s", n, st))
	}
	sort.Strings(states)
	return fmt.Sprintf("%d (%s)", len(s.cluster.Members), strings.Join(states, ", "))
}

func (s *nodeStatus) breakersLine() string {
	if s.brkErr != nil {
		return "unknown: " + s.brkErr.Error()
	}
	var notClosed []string
	for _, v := range s.breakers {
		if v.State != "closed" {
			notClosed = append(notClosed, fmt.Sprintf("%s %s", v.Route, v.State))
		}
	}
	if len(notClosed) == 0 {
		return fmt.Sprintf("all %d closed", len(s.breakers))
	}
	return fmt.Sprintf("%d of %d not closed: %s", len(notClosed), len(s.breakers), strings.Join(notClosed, ", "))
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// isSet reports whether the flag named name was given: an empty -tenant
// names the empty tenant, no -tenant names none.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
