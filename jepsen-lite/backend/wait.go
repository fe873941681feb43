package backend

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"time"
)

// pollEvery is how often readiness and convergence are polled.
const pollEvery = 200 * time.Millisecond

// ClusterStatus is the part of a node's /-/cluster the backends and the
// harness read.
type ClusterStatus struct {
	Node    string `json:"node"`
	Members []struct {
		Name  string `json:"name"`
		State string `json:"state"`
	} `json:"members"`
	Raft *struct {
		State  string   `json:"state"`
		Leader string   `json:"leader"`
		Term   uint64   `json:"term"`
		Voters []string `json:"voters"`
	} `json:"raft"`
}

// Alive lists the members this node sees as alive.
func (s ClusterStatus) Alive() []string {
	var out []string
	for _, m := range s.Members {
		if m.State == "alive" {
			out = append(out, m.Name)
		}
	}
	return out
}

// Leader is the raft leader this node knows, "" when none.
func (s ClusterStatus) Leader() string {
	if s.Raft == nil {
		return ""
	}
	return s.Raft.Leader
}

// Voters is the sorted voter set this node's Raft configuration holds.
func (s ClusterStatus) Voters() []string {
	if s.Raft == nil {
		return nil
	}
	return slices.Sorted(slices.Values(s.Raft.Voters))
}

// statusTimeout bounds one status request, so a paused node fails a poll
// round instead of stalling it.
const statusTimeout = 2 * time.Second

// statusClient keeps no idle connections (a poll every 200 ms does not
// need them) and bounds the dial: the transport finishes a dial after its
// request gave up, and a SYN into a partitioned or lossy node would
// otherwise keep that goroutine for the kernel's minutes of retries.
func statusClient() *http.Client {
	dialer := &net.Dialer{Timeout: time.Second}
	return &http.Client{Timeout: statusTimeout,
		Transport: &http.Transport{DisableKeepAlives: true, DialContext: dialer.DialContext}}
}

// FetchCluster reads node's /-/cluster.
func FetchCluster(ctx context.Context, n Node) (ClusterStatus, error) {
	var st ClusterStatus
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.URL+"/-/cluster", nil)
	if err != nil {
		return st, err
	}
	resp, err := statusClient().Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("%s /-/cluster: %s", n.Name, resp.Status)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// get returns nil when url answers 200.
func get(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := statusClient().Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// poll calls check every pollEvery until it returns nil or ctx ends; the
// error names what and the last failure.
func poll(ctx context.Context, what string, check func(context.Context) error) error {
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("backend: waiting for %s: %w (last: %v)", what, ctx.Err(), err)
		case <-t.C:
		}
	}
}

// waitReady waits until url answers 200 (a node's /-/readyz, the
// upstream's /-/stats).
func waitReady(ctx context.Context, what, url string) error {
	return poll(ctx, what, func(ctx context.Context) error { return get(ctx, url) })
}

// WaitConverged waits until every node in nodes sees all of them alive and
// names the same raft leader.
func WaitConverged(ctx context.Context, nodes []Node) error {
	return poll(ctx, "cluster convergence", func(ctx context.Context) error { return Converged(ctx, nodes) })
}

// WaitRejoined waits until Rejoined holds: every node alive everywhere,
// one leader, and every node a voter in every node's configuration.
func WaitRejoined(ctx context.Context, nodes []Node) error {
	return poll(ctx, "cluster rejoin", func(ctx context.Context) error { return Rejoined(ctx, nodes) })
}

// Converged checks once that every node in nodes sees all of them alive
// and names the same raft leader; the error says who sees what.
func Converged(ctx context.Context, nodes []Node) error {
	sts, err := fetchAll(ctx, nodes)
	if err != nil {
		return err
	}
	return agree(nodes, sts)
}

// Rejoined checks once that nodes have converged (see Converged) and that
// every node lists exactly nodes as the Raft voters: after a restart the
// cluster is whole again, not merely alive around a shrunken quorum.
func Rejoined(ctx context.Context, nodes []Node) error {
	sts, err := fetchAll(ctx, nodes)
	if err != nil {
		return err
	}
	if err := agree(nodes, sts); err != nil {
		return err
	}
	want := make([]string, 0, len(nodes))
	for _, n := range nodes {
		want = append(want, n.Name)
	}
	slices.Sort(want)
	for i, st := range sts {
		if got := st.Voters(); !slices.Equal(got, want) {
			return fmt.Errorf("%s lists voters %v, want %v", nodes[i].Name, got, want)
		}
	}
	return nil
}

func fetchAll(ctx context.Context, nodes []Node) ([]ClusterStatus, error) {
	out := make([]ClusterStatus, 0, len(nodes))
	for _, n := range nodes {
		st, err := FetchCluster(ctx, n)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

// agree: every status sees len(nodes) members alive and names one leader.
func agree(nodes []Node, sts []ClusterStatus) error {
	leader := ""
	for i, st := range sts {
		if a := st.Alive(); len(a) != len(nodes) {
			return fmt.Errorf("%s sees alive %v", nodes[i].Name, a)
		}
		l := st.Leader()
		if l == "" || (leader != "" && l != leader) {
			return fmt.Errorf("%s sees leader %q (others %q)", nodes[i].Name, l, leader)
		}
		leader = l
	}
	return nil
}
