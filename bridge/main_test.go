package bridge_test

import (
	"testing"

	"github.com/tabbridge/tabbridge/internal/testutil"
)

// TestMain fails the package if a hub's reader or writer, or any other
// goroutine a test started, outlives the tests.
func TestMain(m *testing.M) { testutil.VerifyNoLeaks(m) }
