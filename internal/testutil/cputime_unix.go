//go:build !windows

package testutil

import (
	"syscall"
	"time"
)

// CPUTime is the user and system CPU time the process has used, for
// benchmarks that report CPU per byte or per call (a steadier figure than
// wall time on a shared machine).
func CPUTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
