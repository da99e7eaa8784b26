package main

import (
	"io"
	"strings"
	"testing"
	"time"
)

// TestAuditRetentionFromFlagOrEnvironment: 90 days by default, days or a
// duration from the environment or the flag (the flag wins), 0 keeps
// everything, and less than an hour or nonsense is refused with a sentence.
func TestAuditRetentionFromFlagOrEnvironment(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string { return map[string]string{"TABBRIDGE_AUDIT_RETENTION": v}[k] }
	}
	for _, c := range []struct {
		args []string
		env  string
		want time.Duration
		err  string
	}{
		{nil, "", 90 * 24 * time.Hour, ""},
		{nil, "30d", 30 * 24 * time.Hour, ""},
		{[]string{"--audit-retention", "720h"}, "30d", 720 * time.Hour, ""},
		{[]string{"--audit-retention", "0"}, "", 0, ""},
		{[]string{"--audit-retention", "10m"}, "", 0, "at least 1h"},
		{nil, "forever", 0, "TABBRIDGE_AUDIT_RETENTION="},
	} {
		cfg, err := parseServe(c.args, env(c.env), io.Discard)
		if c.err != "" {
			if err == nil || (err != errUsage && !strings.Contains(err.Error(), c.err)) {
				t.Errorf("%v %q: %v; want an error saying %q", c.args, c.env, err, c.err)
			}
			continue
		}
		if err != nil || time.Duration(cfg.auditKeep) != c.want {
			t.Errorf("%v %q: %v, %v; want %v", c.args, c.env, time.Duration(cfg.auditKeep), err, c.want)
		}
	}
}
