package testutil

import (
	"slices"
	"testing"
	"time"
)

// ReportLatency reports the median and 99th percentile of lat (sorted here)
// on b, in milliseconds, as p50-ms and p99-ms.
func ReportLatency(b *testing.B, lat []time.Duration) {
	b.Helper()
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2])/1e6, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100])/1e6, "p99-ms")
}
