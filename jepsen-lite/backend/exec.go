package backend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"strings"
	"time"
)

// ErrCommand is wrapped by every failed external command (ip, iptables,
// tc, nsenter, docker); the error text carries the command and its output.
var ErrCommand = errors.New("backend: command failed")

// cmdTimeout bounds one short external command, so a wedged iptables lock
// or docker daemon fails a fault instead of hanging the nemesis.
const cmdTimeout = 20 * time.Second

// runner executes external commands and logs each one.
type runner struct {
	log *slog.Logger
}

func newRunner(log *slog.Logger) runner {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return runner{log: log}
}

// run executes argv with stdin (may be empty) and returns its combined
// output; a non-zero exit is an ErrCommand naming argv and the output.
func (r runner) run(ctx context.Context, stdin string, argv ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, cmdTimeout)
	defer cancel()
	return r.runLong(ctx, stdin, argv...)
}

// runLong is run bounded by ctx only: for docker builds and compose up.
func (r runner) runLong(ctx context.Context, stdin string, argv ...string) (string, error) {
	if len(argv) == 0 {
		return "", fmt.Errorf("%w: empty command", ErrCommand)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	r.log.Debug("exec", "cmd", strings.Join(argv, " "), "err", err)
	if err != nil {
		return string(out), fmt.Errorf("%w: %s: %v: %s", ErrCommand, strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// must runs argv with a background context; for cleanup paths that have
// no caller context.
func (r runner) must(argv ...string) error {
	_, err := r.run(context.Background(), "", argv...)
	return err
}

// quiet runs argv and ignores failure: for removing things that may not
// exist (leftovers of a crashed run, a second Teardown).
func (r runner) quiet(argv ...string) {
	_, _ = r.run(context.Background(), "", argv...)
}
