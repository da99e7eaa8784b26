package testutil

import (
	"testing"

	"go.uber.org/goleak"
)

// VerifyNoLeaks runs the package's tests and then fails the run if any
// goroutine a test started is still running (goleak retries for a while, so
// goroutines that are winding down are not counted). Call it from TestMain.
func VerifyNoLeaks(m *testing.M) {
	goleak.VerifyTestMain(m, LeakOptions()...)
}

// LeakOptions are the goroutines of dependencies that never end by design,
// which a leak check must not count.
func LeakOptions() []goleak.Option {
	return []goleak.Option{
		// gorm's prepared-statement cache starts an expiry loop whose done
		// channel is never closed (gorm v1 internal/lru: "will never exit").
		goleak.IgnoreAnyFunction("gorm.io/gorm/internal/lru.NewLRU[...].func1"),
	}
}
