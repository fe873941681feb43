package ctxwait

import (
	"context"
	"time"
)

// Sleep waits d unless ctx ends first; it reports whether d passed (false:
// ctx ended). Its timer is stopped either way.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
