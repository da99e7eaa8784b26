package testutil

import (
	"testing"

	"go.uber.org/goleak"
)

// VerifyNoLeaks runs the package's tests and then fails the run if any
// goroutine a test started is still running (goleak retries for a while, so
// goroutines that are winding down are not counted). Call it from TestMain;
// more options (goleak.Cleanup for a package's own teardown) add to
// LeakOptions.
func VerifyNoLeaks(m *testing.M, more ...goleak.Option) {
	goleak.VerifyTestMain(m, append(LeakOptions(), more...)...)
}

// LeakOptions are the goroutines of dependencies that never end by design,
// which a leak check must not count.
func LeakOptions() []goleak.Option {
	return []goleak.Option{
		// gorm's prepared-statement cache starts an expiry loop whose done
		// channel is never closed (gorm v1 internal/lru: "will never exit").
		goleak.IgnoreAnyFunction("gorm.io/gorm/internal/lru.NewLRU[...].func1"),
		// Fiber's in-memory storage (behind the limiter and CSRF middleware
		// when no storage is given) starts a gc loop that only Close ends,
		// and the middleware never closes it; its timestamp updater is one
		// per process and never ends.
		goleak.IgnoreAnyFunction("github.com/gofiber/fiber/v2/internal/memory.(*Storage).gc"),
		goleak.IgnoreAnyFunction("github.com/gofiber/fiber/v2/utils.StartTimeStampUpdater.func1.1"),
		goleak.IgnoreAnyFunction("github.com/gofiber/fiber/v2/internal/memory.New.StartTimeStampUpdater.func1.1"), // inlined
		// fasthttp's worker-pool cleaner sees its stop only when it next
		// wakes, up to MaxIdleWorkerDuration (10 s) after the server stopped.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
		// fasthttp refreshes its Date header from one goroutine per process.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
	}
}
