package terminal

import (
	"bytes"
	"sort"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkSessionEchoSpinner is keystroke → batch inside one Session while
// a 100 fps spinner runs: the coalescer's share of an echo's latency.
func BenchmarkSessionEchoSpinner(b *testing.B) {
	batches := make(chan Batch, 1024)
	s, err := Start(Options{Path: "sh", Args: []string{"-c", "stty raw -echo; (while :; do printf '\\r|'; sleep 0.01; done) & exec cat"},
		Output: func(bt Batch) { batches <- Batch{Offset: bt.Offset, Data: bytes.Clone(bt.Data)} }})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Stop(b.Context())
	var samples []time.Duration
	for i := range b.N {
		time.Sleep(30 * time.Millisecond)
		key := []byte{'a' + byte(i%26)}
		start := time.Now()
		_ = s.Input(key)
		for bt := range batches {
			if bytes.Contains(bt.Data, key) {
				break
			}
		}
		samples = append(samples, time.Since(start))
	}
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	b.ReportMetric(float64(samples[len(samples)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(samples[len(samples)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkSpinnerSends counts the batches a 100 fps spinner alone costs
// per second: coalescing must still hold it to about one per window.
func BenchmarkSpinnerSends(b *testing.B) {
	var n atomic.Int64
	s, err := Start(Options{Path: "sh", Args: []string{"-c", "while :; do printf '\\r|'; sleep 0.01; done"},
		Output: func(Batch) { n.Add(1) }})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Stop(b.Context())
	start := time.Now()
	for range b.N {
		time.Sleep(100 * time.Millisecond)
	}
	b.ReportMetric(float64(n.Load())/time.Since(start).Seconds(), "sends/s")
}
