package server_test

import (
	"testing"

	"github.com/tabbridge/tabbridge/internal/testutil"
)

// TestMain fails the package if a socket's reader or writer, a hub's
// goroutine or anything else a test started outlives the tests: the server's
// shutdown must wait for every goroutine it started.
func TestMain(m *testing.M) { testutil.VerifyNoLeaks(m) }
