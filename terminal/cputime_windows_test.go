package terminal

import "time"

// cpuTime is not measured on Windows: the benchmark then reports wall time only.
func cpuTime() time.Duration { return 0 }
