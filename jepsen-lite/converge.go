package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/levee/levee/jepsen-lite/backend"
	"github.com/levee/levee/jepsen-lite/history"
	"github.com/levee/levee/jepsen-lite/workload"
)

// convergeTimeout bounds the wait for a converged cluster before the run.
const convergeTimeout = 90 * time.Second

// waitConverged polls every node's /-/cluster until all see every node
// alive and on the ring and name the same leader, so the run's first
// seconds are not spent in start-up elections (they would count as
// healthy time).
func waitConverged(ctx context.Context, nodes []backend.Node) error {
	ctx, cancel := context.WithTimeout(ctx, convergeTimeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{Proxy: nil}}
	defer client.CloseIdleConnections()
	for {
		if converged(ctx, client, nodes) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster did not converge within %v: %w", convergeTimeout, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func converged(ctx context.Context, client *http.Client, nodes []backend.Node) bool {
	leader := ""
	for _, n := range nodes {
		m, ok := viewOf(ctx, client, n)
		if !ok || m.Leader == "" || (leader != "" && m.Leader != leader) {
			return false
		}
		leader = m.Leader
		for _, x := range nodes {
			if !slices.Contains(m.Alive, x.Name) || !slices.Contains(m.Ring, x.Name) {
				return false
			}
		}
	}
	return true
}

func viewOf(ctx context.Context, client *http.Client, n backend.Node) (history.Membership, bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.URL+"/-/cluster", nil)
	if err != nil {
		return history.Membership{}, false
	}
	resp, err := client.Do(req)
	if err != nil {
		return history.Membership{}, false
	}
	defer resp.Body.Close()
	var v workload.ClusterView
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&v) != nil {
		return history.Membership{}, false
	}
	return workload.MembershipOf(history.Membership{Node: n.Name}, v), true
}
