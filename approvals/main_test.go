package approvals_test

import (
	"testing"

	"github.com/tabbridge/tabbridge/internal/testutil"
)

// TestMain fails the package if a Decide, an expiry timer or any other
// goroutine a test started outlives the tests.
func TestMain(m *testing.M) { testutil.VerifyNoLeaks(m) }
