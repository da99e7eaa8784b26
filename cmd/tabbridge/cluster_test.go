package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/cluster"
)

// TestClusterFlags: the registry's periods have their stated defaults, read
// the environment, and refuse a dead threshold one late beat would cross.
func TestClusterFlags(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	c, err := parseServe(nil, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.heartbeat != cluster.DefaultHeartbeat || c.deadAfter != cluster.DefaultDeadAfter {
		t.Fatalf("defaults: heartbeat %v, dead after %v", c.heartbeat, c.deadAfter)
	}
	c, err = parseServe([]string{"--instance-id", "web-1"}, env(map[string]string{"TABBRIDGE_HEARTBEAT": "2s", "TABBRIDGE_DEAD_AFTER": "10s"}), io.Discard)
	if err != nil || c.heartbeat != 2*time.Second || c.deadAfter != 10*time.Second || c.instanceID != "web-1" {
		t.Fatalf("from the environment: %+v, %v", c, err)
	}
	if _, err := parseServe([]string{"--heartbeat", "10s", "--dead-after", "15s"}, env(nil), io.Discard); err == nil || !strings.Contains(err.Error(), "at least twice") {
		t.Fatalf("dead-after under twice the heartbeat: %v", err)
	}
}
