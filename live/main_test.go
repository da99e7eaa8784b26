package live

import (
	"testing"

	"github.com/tabbridge/tabbridge/internal/testutil"
)

// TestMain fails the package if a subscription's goroutine outlives the
// tests.
func TestMain(m *testing.M) { testutil.VerifyNoLeaks(m) }
