package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// clockTicks is the kernel's USER_HZ, the unit of /proc/PID/stat's CPU
// times: 100 on every Linux this runs on.
const clockTicks = 100

// hitRun is what a hit phase measured.
type hitRun struct {
	hits    int64
	took    time.Duration
	cpu     time.Duration // the node's user + system time during it
	rssPeak int64         // VmHWM after it: the resident set's high-water mark
}

// hitLoad asks for keys 0..n-1 at random, already cached, with conns
// clients for d, and measures the node's CPU over it.
func hitLoad(ctx context.Context, base string, pid, n, conns int, d time.Duration) (hitRun, error) {
	cpu0, err := readCPU(pid)
	if err != nil {
		return hitRun{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns}}
	var hits atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range conns {
		wg.Go(func() {
			for ctx.Err() == nil {
				if _, err := get(ctx, client, base+keyPath(rand.IntN(n))); err == nil {
					hits.Add(1)
				}
			}
		})
	}
	wg.Wait()
	r := hitRun{hits: hits.Load(), took: time.Since(start)}
	cpu1, err := readCPU(pid)
	if err != nil {
		return r, err
	}
	r.cpu = cpu1 - cpu0
	r.rssPeak, err = readStatus(pid, "VmHWM:")
	return r, err
}

// readCPU is pid's user plus system time so far.
func readCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces: fields count from after its ')'.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	var ticks int64
	for _, f := range fields[11:13] { // utime, stime (fields 14 and 15)
		t, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, err
		}
		ticks += t
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

func (r hitRun) print(w interface{ Write([]byte) (int, error) }) error {
	_, err := fmt.Fprintf(w, "\nhits: %d in %v (%.0f/s), node CPU %v: %.1f µs per hit; peak RSS %.0f MB\n",
		r.hits, r.took.Round(time.Millisecond), float64(r.hits)/r.took.Seconds(), r.cpu,
		float64(r.cpu.Microseconds())/float64(max(r.hits, 1)), float64(r.rssPeak)/1e6)
	return err
}
