package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// readStatus is one "Name:   123456 kB" line of /proc/PID/status, in
// bytes: VmRSS is the resident set now, VmHWM its high-water mark.
func readStatus(pid int, name string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseStatus(b, name)
}

// parseStatus reads the line that starts with name in a /proc status file.
func parseStatus(status []byte, name string) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), name)
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s %w", name, err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("no %s line", name)
}

// cacheSeries are the node's cache gauges.
type cacheSeries struct {
	bytes, entries int64
}

// scrape reads levee_cache_bytes and levee_cache_entries from base/metrics.
func scrape(base string) (cacheSeries, error) {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return cacheSeries{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return cacheSeries{}, err
	}
	return parseSeries(body)
}

// parseSeries finds the two gauges in a Prometheus text exposition.
func parseSeries(text []byte) (cacheSeries, error) {
	var s cacheSeries
	found := 0
	for line := range strings.Lines(string(text)) {
		name, value, ok := strings.Cut(strings.TrimSpace(line), " ")
		dst := map[string]*int64{"levee_cache_bytes": &s.bytes, "levee_cache_entries": &s.entries}[name]
		if !ok || dst == nil {
			continue
		}
		f, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return s, fmt.Errorf("%s: %w", name, err)
		}
		*dst = int64(f)
		found++
	}
	if found != 2 {
		return s, fmt.Errorf("levee_cache_bytes and levee_cache_entries not both in /metrics")
	}
	return s, nil
}

// row is one measurement.
type row struct {
	keys    int
	bodies  int64 // bytes of the bodies fetched
	rss     int64
	weight  int64 // levee_cache_bytes
	entries int64
	fill    time.Duration
}

func (r row) print(w io.Writer) error {
	mb := func(n int64) string { return fmt.Sprintf("%.0f MB", float64(n)/1e6) }
	_, err := fmt.Fprintf(w, "| keys | entries | bodies | RSS | weight | RSS/bodies | weight/RSS | fill |\n"+
		"|---:|---:|---:|---:|---:|---:|---:|---:|\n"+
		"| %d | %d | %s | %s | %s | %.2f | %.2f | %v |\n",
		r.keys, r.entries, mb(r.bodies), mb(r.rss), mb(r.weight),
		float64(r.rss)/float64(r.bodies), float64(r.weight)/float64(r.rss), r.fill.Round(time.Second))
	return err
}
