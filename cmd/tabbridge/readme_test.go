package main

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// readmeRow is one row of a flag table in README.md: its flags, its
// environment variables and the first literal of its default.
type readmeRow struct {
	flags, envs []string
	def         string
}

var (
	backFlag    = regexp.MustCompile("`--([a-z0-9-]+)`")
	backEnv     = regexp.MustCompile("`([A-Z][A-Z0-9_]+)`")
	backLiteral = regexp.MustCompile("`([^`]+)`")
)

// readmeTable reads the first flag table ("| flag | environment | default |
// …") after the line heading of README.md.
func readmeTable(t *testing.T, heading string) []readmeRow {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("README.md has no heading %q", heading)
	}
	_, table, ok := strings.Cut(after, "\n| flag | environment | default |")
	if !ok {
		t.Fatalf("README.md has no flag table after %q", heading)
	}
	var rows []readmeRow
	for _, line := range strings.Split(table, "\n")[2:] { // past the header's end and the rule
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(line, " | ")
		if len(cells) < 4 {
			t.Fatalf("README.md row %q has fewer than four cells", line)
		}
		var r readmeRow
		for _, m := range backFlag.FindAllStringSubmatch(cells[0], -1) {
			r.flags = append(r.flags, m[1])
		}
		for _, m := range backEnv.FindAllStringSubmatch(cells[1], -1) {
			r.envs = append(r.envs, m[1])
		}
		if m := backLiteral.FindStringSubmatch(cells[2]); m != nil {
			r.def = m[1]
		}
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		t.Fatalf("README.md's flag table after %q is empty", heading)
	}
	return rows
}

// usageFlag is a flag as its command's -h prints it.
type usageFlag struct {
	name, usage, env, def string
}

var (
	usageEnv     = regexp.MustCompile(`\(([A-Z][A-Z0-9_]+)[;)]`)
	usageDefault = regexp.MustCompile(`\(default "?([^"]*?)"?\)$|\([A-Z][A-Z0-9_]+(?:; else [A-Z]+)?; default ([^)]*)\)$`)
)

// usageFlags reads what flag.PrintDefaults printed: "  -name type" then the
// usage on a line of its own.
func usageFlags(t *testing.T, out string) map[string]usageFlag {
	t.Helper()
	flags := map[string]usageFlag{}
	lines := strings.Split(out, "\n")
	for i, line := range lines {
		if !strings.HasPrefix(line, "  -") || i+1 >= len(lines) {
			continue
		}
		f := usageFlag{name: strings.Fields(line)[0][1:], usage: strings.TrimSpace(lines[i+1])}
		if m := usageEnv.FindStringSubmatch(f.usage); m != nil {
			f.env = m[1]
		}
		if m := usageDefault.FindStringSubmatch(f.usage); m != nil {
			f.def = m[1] + m[2]
		}
		flags[f.name] = f
	}
	if len(flags) == 0 {
		t.Fatalf("no flags in the usage:\n%s", out)
	}
	return flags
}

// sameDefault compares a default as the README writes it with the flag's:
// durations by their value (5m and 5m0s), anything else as text.
func sameDefault(readme, flag string) bool {
	if readme == flag {
		return true
	}
	a, errA := time.ParseDuration(readme)
	b, errB := time.ParseDuration(flag)
	return errA == nil && errB == nil && a == b
}

// checkTable holds the README's table to the command's own flags: every
// flag is in the table, every flag of the table exists, each with the
// environment variable and the default the command uses. refused names
// flags that exist only to be refused, which the README describes in words.
func checkTable(t *testing.T, rows []readmeRow, flags map[string]usageFlag, refused ...string) {
	t.Helper()
	inTable := map[string]bool{}
	for _, r := range rows {
		for _, name := range r.flags {
			inTable[name] = true
			f, ok := flags[name]
			if !ok {
				t.Errorf("README.md documents --%s, which the command does not have", name)
				continue
			}
			if f.env != "" && !slices.Contains(r.envs, f.env) {
				t.Errorf("--%s reads %s; README.md says %v", name, f.env, r.envs)
			}
			if f.env == "" && len(r.envs) > 0 {
				t.Errorf("--%s reads no environment variable; README.md says %v", name, r.envs)
			}
			if len(r.flags) == 1 && r.def != "" && f.def != "" && !sameDefault(r.def, f.def) {
				t.Errorf("--%s defaults to %q; README.md says %q", name, f.def, r.def)
			}
		}
	}
	for name := range flags {
		if !inTable[name] && !slices.Contains(refused, name) {
			t.Errorf("--%s (%s) is not in README.md's table", name, flags[name].usage)
		}
	}
}

// TestREADMEConfigurationIsTheFlags: the README's tables of settings are
// the flags `tabbridge serve` and `tabbridge daemon` have, with the
// environment variables and defaults they use.
func TestREADMEConfigurationIsTheFlags(t *testing.T) {
	t.Run("serve", func(t *testing.T) {
		var out bytes.Buffer
		if _, err := parseServe([]string{"-h"}, func(string) string { return "" }, &out); err != errHelp {
			t.Fatalf("serve -h: %v", err)
		}
		checkTable(t, readmeTable(t, "## Configuration"), usageFlags(t, out.String()))
	})
	t.Run("daemon", func(t *testing.T) {
		var out bytes.Buffer
		if err := runDaemon(context.Background(), []string{"-h"}, func(string) string { return "" }, &out); err != nil {
			t.Fatalf("daemon -h: %v", err)
		}
		checkTable(t, readmeTable(t, "### Terminal daemon"), usageFlags(t, out.String()), "token")
	})
}
