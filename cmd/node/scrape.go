package main

import (
	"bufio"
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A few numbers the CLI shows are only in /metrics (the queue's depth, the
// build's version): this reads them from the Prometheus text format
// without a client library.

// sample is one series' line in the Prometheus text format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// scrape returns the samples of the named series in a /metrics answer;
// lines it cannot read are skipped.
func scrape(text []byte, names ...string) []sample {
	var out []sample
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name := line[:strings.IndexAny(line+" ", "{ ")]
		if !slices.Contains(names, name) {
			continue
		}
		if s, ok := parseSample(name, line[len(name):]); ok {
			out = append(out, s)
		}
	}
	return out
}

// parseSample reads `{k="v",...} value [timestamp]`.
func parseSample(name, rest string) (sample, bool) {
	s := sample{name: name, labels: map[string]string{}}
	if strings.HasPrefix(rest, "{") {
		rest = rest[1:]
		for !strings.HasPrefix(rest, "}") {
			key, after, ok := strings.Cut(rest, "=")
			if !ok {
				return s, false
			}
			// Prometheus escapes \\, \" and \n as Go does.
			quoted, err := strconv.QuotedPrefix(after)
			if err != nil {
				return s, false
			}
			s.labels[strings.TrimSpace(key)], _ = strconv.Unquote(quoted)
			rest = strings.TrimPrefix(strings.TrimSpace(after[len(quoted):]), ",")
		}
		rest = rest[1:]
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return s, false
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	s.value = v
	return s, err == nil
}

// queueDepth is the durable queue as levee status shows it.
type queueDepth struct {
	Queued        int     `json:"queued"`
	Delayed       int     `json:"delayed"`
	Running       int     `json:"running"`
	Done          int     `json:"done"`
	Dead          int     `json:"dead"`
	OldestSeconds float64 `json:"oldest_job_age_seconds"`
}

// queueFromMetrics reads levee_queue_jobs{host,state} and the oldest
// job's age; nil when the node runs no queue (the age gauge is absent).
func queueFromMetrics(text []byte) *queueDepth {
	samples := scrape(text, "levee_queue_jobs", "levee_queue_oldest_job_age_seconds")
	q, found := &queueDepth{}, false
	for _, s := range samples {
		if s.name == "levee_queue_oldest_job_age_seconds" {
			q.OldestSeconds, found = s.value, true
			continue
		}
		n := int(s.value)
		switch s.labels["state"] {
		case "queued":
			q.Queued += n
		case "delayed":
			q.Delayed += n
		case "running":
			q.Running += n
		case "done":
			q.Done += n
		case "dead":
			q.Dead += n
		}
	}
	if !found {
		return nil
	}
	return q
}

func (q *queueDepth) String() string {
	s := fmt.Sprintf("%d waiting (%d queued, %d delayed, %d running), %d dead",
		q.Queued+q.Delayed+q.Running, q.Queued, q.Delayed, q.Running, q.Dead)
	if q.OldestSeconds > 0 {
		s += ", oldest " + time.Duration(q.OldestSeconds*float64(time.Second)).Round(time.Second).String()
	}
	return s
}

// versionFromMetrics reads the version label of levee_build_info, "" when
// the node does not report one.
func versionFromMetrics(text []byte) string {
	for _, s := range scrape(text, "levee_build_info") {
		if v := s.labels["version"]; v != "" {
			return v
		}
	}
	return ""
}
