package control

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/levee/levee/internal/testutil"
)

// TestMain fails the package when a test leaves a goroutine behind: a
// Plane or Solo owns Raft's, which Close must stop.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, testutil.UnansweredRaftFutures)
}
