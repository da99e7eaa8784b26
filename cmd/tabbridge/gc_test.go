package main

import (
	"io"
	"math"
	"runtime/debug"
	"strings"
	"testing"
)

// TestGCSettings: the collector's settings come from the flag, else the
// Tabbridge variable, else Go's own variable (left to the runtime), else the
// shipped defaults; a value that does not parse is refused, naming it.
func TestGCSettings(t *testing.T) {
	cases := []struct {
		env  map[string]string
		args []string
		want gcConfig
	}{
		{nil, nil, gcConfig{percent: defaultGCPercent, headroom: defaultGCHeadroom, limit: defaultMemoryLimit}},
		{map[string]string{"TABBRIDGE_GC_PERCENT": "200", "TABBRIDGE_MEMORY_LIMIT": "512MiB"}, nil, gcConfig{percent: 200, headroom: defaultGCHeadroom, limit: 512 << 20}},
		{map[string]string{"TABBRIDGE_GC_PERCENT": "200"}, []string{"--gc-percent", "off", "--memory-limit", "2GiB"}, gcConfig{percent: -1, headroom: defaultGCHeadroom, limit: 2 << 30}},
		{map[string]string{"GOGC": "50", "GOMEMLIMIT": "100MiB"}, nil, gcConfig{keepPercent: true, keepLimit: true}},
		{map[string]string{"GOGC": "50"}, []string{"--gc-percent", "300", "--memory-limit", "off"}, gcConfig{percent: 300, headroom: defaultGCHeadroom, limit: math.MaxInt64}},
		{nil, []string{"--memory-limit", "1048576"}, gcConfig{percent: defaultGCPercent, headroom: defaultGCHeadroom, limit: 1 << 20}},
		{map[string]string{"TABBRIDGE_GC_HEADROOM": "off"}, nil, gcConfig{percent: defaultGCPercent, limit: defaultMemoryLimit}},
		{map[string]string{"TABBRIDGE_GC_HEADROOM": "off"}, []string{"--gc-headroom", "32MiB"}, gcConfig{percent: defaultGCPercent, headroom: 32 << 20, limit: defaultMemoryLimit}},
		{map[string]string{"GOGC": "50"}, []string{"--gc-headroom", "32MiB"}, gcConfig{keepPercent: true, limit: defaultMemoryLimit}},
	}
	for _, c := range cases {
		cfg, err := parseServe(c.args, func(k string) string { return c.env[k] }, io.Discard)
		if err != nil || cfg.gc != c.want {
			t.Errorf("%v %v: %+v %v, want %+v", c.env, c.args, cfg, err, c.want)
		}
	}
	for _, c := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{map[string]string{"TABBRIDGE_GC_PERCENT": "-5"}, nil, `TABBRIDGE_GC_PERCENT="-5": want a positive whole number`},
		{nil, []string{"--gc-percent", "lots"}, `--gc-percent "lots": want a positive whole number`},
		{map[string]string{"TABBRIDGE_MEMORY_LIMIT": "1GB"}, nil, `TABBRIDGE_MEMORY_LIMIT="1GB": want a size such as 512MiB`},
		{nil, []string{"--memory-limit", "0"}, `--memory-limit "0": want a size`},
		{map[string]string{"TABBRIDGE_GC_HEADROOM": "lots"}, nil, `TABBRIDGE_GC_HEADROOM="lots": want a size such as 512MiB`},
		{nil, []string{"--memory-limit", "99999999999TiB"}, `--memory-limit "99999999999TiB": want a size`},
	} {
		_, err := parseServe(c.args, func(k string) string { return c.env[k] }, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v %v: got %v, want an error mentioning %q", c.env, c.args, err, c.want)
		}
	}
}

// TestServeSetsTheCollector: a started server runs with the settings asked for.
func TestServeSetsTheCollector(t *testing.T) {
	prevPercent, prevLimit := debug.SetGCPercent(100), debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetGCPercent(prevPercent); debug.SetMemoryLimit(prevLimit) })
	url := startServe(t, map[string]string{"TABBRIDGE_DATA_DIR": t.TempDir(), "TABBRIDGE_MEMORY_LIMIT": "300MiB"}, "--gc-percent", "250", "--gc-headroom", "off")
	// Served a request: Serve is running, so the shutdown at cleanup finds it
	// (stopping a server whose Serve has not started yet hangs its caller).
	if got := getStatus(t, url+"/readyz"); got != 200 {
		t.Fatalf("readyz: %d", got)
	}
	if p := debug.SetGCPercent(100); p != 250 {
		t.Errorf("GC percent %d, want 250", p)
	}
	if l := debug.SetMemoryLimit(-1); l != 300<<20 {
		t.Errorf("memory limit %d, want %d", l, 300<<20)
	}
}
