package backend

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// ErrBusy is returned by Setup when another run of the same backend kind
// held the machine-wide run lock until the Setup context ended.
var ErrBusy = errors.New("backend: another chaos run holds the backend")

// runLock serialises runs of one backend kind on a machine. The local
// backend's names and addresses are fixed (so a crashed run can be cleaned
// up) and the compose project name is fixed, so a second concurrent Setup
// would tear down the first run's cluster. flock is released by the
// kernel when the holder dies, so a crashed run never blocks the next.
type runLock struct {
	f *os.File
}

// lockPath is the lock file of backend kind ("local", "docker").
func lockPath(kind string) string {
	return filepath.Join(os.TempDir(), "levee-chaos-"+kind+".lock")
}

// acquire waits, until ctx ends, for the exclusive lock of kind.
func acquire(ctx context.Context, kind string) (*runLock, error) {
	f, err := os.OpenFile(lockPath(kind), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("backend: %w", err)
	}
	err = poll(ctx, "the "+kind+" backend lock (another chaos run is using it)", func(context.Context) error {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("%s is held", f.Name())
		}
		return err
	})
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: %w", ErrBusy, err)
	}
	return &runLock{f: f}, nil
}

// release drops the lock; nil-safe and idempotent.
func (l *runLock) release() {
	if l != nil && l.f != nil {
		_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
		l.f.Close()
		l.f = nil
	}
}
