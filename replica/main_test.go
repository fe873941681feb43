package replica

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that every Replicator a test starts (push workers,
// hand-off and invalidation loops) is gone once the tests end.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
