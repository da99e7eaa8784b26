package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/tabbridge/tabbridge/server"
)

// The garbage collector's shipped settings; see server.DefaultGCPercent.
const (
	defaultGCPercent   = server.DefaultGCPercent
	defaultGCHeadroom  = server.DefaultGCHeadroom
	defaultMemoryLimit = server.DefaultMemoryLimit
)

// gcConfig is how the garbage collector is set when the server starts.
type gcConfig struct {
	// percent is passed to debug.SetGCPercent; -1 turns the proportional
	// trigger off (then only the memory limit starts a collection).
	percent int
	// headroom, when above 0 with a percent above 100, makes percent a
	// most: after each collection the percentage is set so the heap may
	// grow by headroom bytes, within [100, percent] (server.TuneGC).
	headroom int64
	// limit is passed to debug.SetMemoryLimit, in bytes; math.MaxInt64 is none.
	limit int64
	// keepPercent, keepLimit leave Go's own setting in place: the operator
	// set GOGC or GOMEMLIMIT and no Tabbridge flag or variable.
	keepPercent, keepLimit bool
}

// gcFlags registers --gc-percent and --memory-limit. Their defaults are
// TABBRIDGE_GC_PERCENT and TABBRIDGE_MEMORY_LIMIT, else Go's GOGC and
// GOMEMLIMIT (applied by the runtime itself), else the shipped defaults.
// It returns the function that checks the values after parsing.
func gcFlags(fs *flag.FlagSet, getenv func(string) string, c *gcConfig) func() error {
	percent := strings.TrimSpace(getenv("TABBRIDGE_GC_PERCENT"))
	limit := strings.TrimSpace(getenv("TABBRIDGE_MEMORY_LIMIT"))
	headroom := strings.TrimSpace(getenv("TABBRIDGE_GC_HEADROOM"))
	var percentSet, limitSet, headroomSet bool
	fs.Func("gc-percent", fmt.Sprintf("garbage collection target: heap growth in percent between collections, or off (TABBRIDGE_GC_PERCENT; else GOGC; default %d)", defaultGCPercent), func(v string) error {
		percent, percentSet = v, true
		return nil
	})
	fs.Func("gc-headroom", "most the heap grows by between collections, such as 64MiB, within 100 % and --gc-percent of the heap in use; off keeps --gc-percent fixed (TABBRIDGE_GC_HEADROOM; default 64MiB)", func(v string) error {
		headroom, headroomSet = v, true
		return nil
	})
	fs.Func("memory-limit", "soft memory limit of the Go runtime, such as 512MiB or 2GiB, or off (TABBRIDGE_MEMORY_LIMIT; else GOMEMLIMIT; default 1GiB)", func(v string) error {
		limit, limitSet = v, true
		return nil
	})
	return func() error {
		name := func(set bool, flagName, envName string) string {
			if set {
				return "--" + flagName + " "
			}
			return envName + "="
		}
		switch {
		case percent != "":
			p, err := parseGCPercent(percent)
			if err != nil {
				return fmt.Errorf("%s%q: %w", name(percentSet, "gc-percent", "TABBRIDGE_GC_PERCENT"), percent, err)
			}
			c.percent = p
		case getenv("GOGC") != "":
			c.keepPercent = true
		default:
			c.percent = defaultGCPercent
		}
		switch {
		case c.keepPercent:
		case headroom != "":
			h, err := parseMemoryLimit(headroom)
			if err != nil {
				return fmt.Errorf("%s%q: %w", name(headroomSet, "gc-headroom", "TABBRIDGE_GC_HEADROOM"), headroom, err)
			}
			if h != math.MaxInt64 {
				c.headroom = h
			}
		default:
			c.headroom = defaultGCHeadroom
		}
		switch {
		case limit != "":
			l, err := parseMemoryLimit(limit)
			if err != nil {
				return fmt.Errorf("%s%q: %w", name(limitSet, "memory-limit", "TABBRIDGE_MEMORY_LIMIT"), limit, err)
			}
			c.limit = l
		case getenv("GOMEMLIMIT") != "":
			c.keepLimit = true
		default:
			c.limit = defaultMemoryLimit
		}
		return nil
	}
}

func parseGCPercent(v string) (int, error) {
	if strings.EqualFold(v, "off") {
		return -1, nil
	}
	p, err := strconv.Atoi(v)
	if err != nil || p <= 0 {
		return 0, errors.New("want a positive whole number of percent, such as 400, or off")
	}
	return p, nil
}

// parseMemoryLimit reads a size as GOMEMLIMIT writes it: a whole number of
// bytes with an optional unit B, KiB, MiB, GiB or TiB; or off.
func parseMemoryLimit(v string) (int64, error) {
	if strings.EqualFold(v, "off") {
		return math.MaxInt64, nil
	}
	bad := errors.New("want a size such as 512MiB or 2GiB (units B, KiB, MiB, GiB, TiB), or off")
	units := []struct {
		suffix string
		shift  uint
	}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}}
	num, shift := v, uint(0)
	for _, u := range units {
		if strings.HasSuffix(v, u.suffix) {
			num, shift = strings.TrimSuffix(v, u.suffix), u.shift
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > math.MaxInt64>>shift {
		return 0, bad
	}
	return n << shift, nil
}

// apply sets the collector; what Go's own variables set is left alone. The
// returned stop ends the tuning of the percentage (--gc-headroom).
func (c gcConfig) apply() (stop func()) {
	stop = func() {}
	switch {
	case c.keepPercent:
	case c.percent > 100 && c.headroom > 0:
		stop = server.TuneGC(c.percent, c.headroom)
	default:
		debug.SetGCPercent(c.percent)
	}
	if !c.keepLimit {
		debug.SetMemoryLimit(c.limit)
	}
	return stop
}

// String says how the collector is set, for the start-up log.
func (c gcConfig) String() string {
	percent, limit := "GOGC", "GOMEMLIMIT"
	if !c.keepPercent {
		percent = strconv.Itoa(c.percent)
		if c.percent < 0 {
			percent = "off"
		}
	}
	if !c.keepLimit {
		limit = "off"
		if c.limit != math.MaxInt64 {
			limit = strconv.FormatInt(c.limit>>20, 10) + "MiB"
		}
	}
	headroom := "off"
	if c.headroom > 0 && c.percent > 100 && !c.keepPercent {
		headroom = strconv.FormatInt(c.headroom>>20, 10) + "MiB"
	}
	return "gc-percent=" + percent + " gc-headroom=" + headroom + " memory-limit=" + limit
}
