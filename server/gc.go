package server

// The garbage collector settings `tabbridge serve` ships (its --gc-percent
// and --memory-limit defaults), measured on the call path: the MCP SDK
// allocates about 370 KB of short-lived buffers per call (a JSON decoder with
// a 32 KiB buffer for each message it decodes), so with Go's default of 100
// the collector took about a quarter of each call's CPU. A higher percentage
// lets the heap grow further between collections; the memory limit bounds
// what that costs, the collector working harder as the heap nears it. See
// docs/BENCHMARKS.md, "Call path at the floor".
const (
	DefaultGCPercent   = 400
	DefaultMemoryLimit = 1 << 30 // bytes
)
