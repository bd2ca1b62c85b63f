package worksclient

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: no waiter, no
// connection.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
