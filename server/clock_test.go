package server_test

import (
	"sync/atomic"
	"time"
)

// clock is a settable clock for token expiry tests.
type clock struct{ off atomic.Int64 }

func (c *clock) now() time.Time          { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *clock) advance(d time.Duration) { c.off.Add(int64(d)) }
