package relay

import (
	"testing"

	"go.uber.org/goleak"
)

// Every relay a test starts must leave no goroutine behind once closed.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
