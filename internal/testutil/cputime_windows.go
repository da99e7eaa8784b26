package testutil

import "time"

// CPUTime is not measured on Windows: a benchmark's CPU metric is then 0.
func CPUTime() time.Duration { return 0 }
