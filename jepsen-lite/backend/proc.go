package backend

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// proc is one child process the local backend started. A goroutine waits
// for it, so a killed process is reaped at once and done tells Alive.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited and been reaped
	log  *os.File
}

// startProc starts argv with stdout and stderr appended to logPath. The
// child dies with the harness (Pdeathsig), so a crashed run leaves no
// process holding the fixed addresses the next Setup needs.
func startProc(argv []string, logPath string) (*proc, error) {
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("backend: start %s: %w", argv[0], err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{}), log: lf}
	go func() {
		_ = cmd.Wait() // exit status is expected to be "killed"; Alive reports it
		lf.Close()
		close(p.done)
	}()
	return p, nil
}

// alive reports whether the process has not exited yet.
func (p *proc) alive() bool {
	if p == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// signal sends sig unless the process has already exited.
func (p *proc) signal(sig syscall.Signal) error {
	if !p.alive() {
		return fmt.Errorf("backend: process not running")
	}
	return p.cmd.Process.Signal(sig)
}

// kill sends SIGKILL and waits until the process is reaped, so Alive is
// false when Kill returns.
func (p *proc) kill() {
	if p.alive() {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	}
}

// stopWait bounds how long Pause/Resume wait for the kernel to report the
// new state: a signal is delivered asynchronously, and a nemesis that
// checks right after Pause must find the process frozen.
const stopWait = 2 * time.Second

// waitStopped polls /proc until the process is stopped (or not), so Pause
// and Resume return once the fault is real.
func (p *proc) waitStopped(stopped bool) error {
	deadline := time.Now().Add(stopWait)
	for {
		st, err := procState(p.cmd.Process.Pid)
		if err != nil {
			return err
		}
		if (st == "T") == stopped {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("backend: pid %d state %s after %v", p.cmd.Process.Pid, st, stopWait)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// procState is the one-letter state of pid from /proc/<pid>/stat ("T" for
// stopped). The command name before it is in parentheses and may contain
// spaces, so the state is read after the last ")".
func procState(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", fmt.Errorf("backend: %w", err)
	}
	return parseProcState(string(b))
}

func parseProcState(stat string) (string, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return "", fmt.Errorf("backend: malformed /proc stat %q", stat)
	}
	f := strings.Fields(stat[i+1:])
	if len(f) == 0 {
		return "", fmt.Errorf("backend: malformed /proc stat %q", stat)
	}
	return f[0], nil
}
