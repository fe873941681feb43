package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"time"
)

// waitPoll is how often storm wait asks again.
const waitPoll = 200 * time.Millisecond

// clusterDoc is the part of Levee's GET /-/cluster that wait reads; both
// releases measured serve it.
type clusterDoc struct {
	Members []struct {
		Name  string `json:"name"`
		State string `json:"state"`
	} `json:"members"`
	Raft *struct {
		Leader string `json:"leader"`
	} `json:"raft"`
}

// waitCmd polls until every target answers HTTP at all, or, with
// -members N, until every target is a Levee node that is ready, sees N
// alive members and knows a Raft leader: a pause or a breaker trip is a
// Raft command, so a measurement must not start before there is a leader.
func waitCmd(args []string) error {
	fs := flag.NewFlagSet("storm wait", flag.ContinueOnError)
	targets := fs.String("targets", "", "comma-separated base URLs (required)")
	members := fs.Int("members", 0, "Levee cluster size to wait for; 0: any HTTP answer will do")
	timeout := fs.Duration("timeout", time.Minute, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	urls := splitList(*targets)
	if len(urls) == 0 {
		return errors.New("storm wait: -targets is required")
	}
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(*timeout)
	for _, u := range urls {
		if err := waitOne(client, u, *members, deadline); err != nil {
			return err
		}
	}
	return nil
}

func waitOne(client *http.Client, base string, members int, deadline time.Time) error {
	for {
		err := probe(client, base, members)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("storm wait: %s: %w", base, err)
		}
		time.Sleep(waitPoll)
	}
}

func probe(client *http.Client, base string, members int) error {
	if members == 0 {
		resp, err := client.Get(base + "/")
		if err != nil {
			return err
		}
		return resp.Body.Close()
	}
	if err := getOK(client, base+"/-/readyz", nil); err != nil {
		return err
	}
	var doc clusterDoc
	if err := getOK(client, base+"/-/cluster", &doc); err != nil {
		return err
	}
	alive := 0
	for _, m := range doc.Members {
		if m.State == "alive" {
			alive++
		}
	}
	switch {
	case alive != members:
		return fmt.Errorf("%d of %d members alive", alive, members)
	case doc.Raft != nil && doc.Raft.Leader == "":
		return errors.New("no Raft leader yet")
	}
	return nil
}

func getOK(client *http.Client, url string, into any) error {
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if into == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(into)
}
