package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"
)

// settle is how long the run waits after the last client answer before it
// reads the upstream's log, so calls the proxies still make on their own
// (a background refresh, a retry whose client has gone) are counted.
const settle = time.Second

// stormTimes are when the fault was actually set and cleared.
type stormTimes struct {
	set, cleared time.Duration
}

func runCmd(args []string, out io.Writer) error {
	cfg, err := parseRunFlags(args)
	if err != nil {
		return err
	}
	res, err := measure(cfg)
	if err != nil {
		return err
	}
	if cfg.Out != "" {
		data, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(cfg.Out, append(data, '\n'), 0o644); err != nil {
			return err
		}
	}
	_, err = fmt.Fprintln(out, res.summary())
	return err
}

// measure runs the load and the storm, then reads the upstream's log.
func measure(cfg Config) (*Result, error) {
	up := newUpstreamAdmin(cfg.Upstream)
	if err := up.heal(); err != nil {
		return nil, err
	}
	if err := up.reset(); err != nil {
		return nil, err
	}
	l := newLoader(cfg)
	t0 := time.Now()
	type driven struct {
		times stormTimes
		err   error
	}
	done := make(chan driven, 1)
	go func() {
		times, err := driveStorm(up, cfg, t0)
		done <- driven{times, err}
	}()
	l.run(t0)
	d := <-done
	if d.err != nil {
		return nil, d.err
	}
	time.Sleep(settle)
	calls, err := up.calls()
	if err != nil {
		return nil, err
	}
	return analyse(cfg, t0, d.times, calls, l.results()), nil
}

// driveStorm sets the fault at Before and clears it at Before+Storm. A
// failed set or clear fails the run, and a storm is never left behind.
func driveStorm(up upstreamAdmin, cfg Config, t0 time.Time) (stormTimes, error) {
	var st stormTimes
	time.Sleep(time.Until(t0.Add(cfg.Before)))
	err := up.storm(cfg.RetryAfter)
	st.set = time.Since(t0)
	if err != nil {
		return st, err
	}
	time.Sleep(time.Until(t0.Add(cfg.Before + cfg.Storm)))
	err = up.heal()
	st.cleared = time.Since(t0)
	return st, err
}
