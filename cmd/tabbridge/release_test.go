//go:build !windows

package main

import (
	"archive/zip"
	"encoding/json"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReleaseExtensionZip: scripts/release packs the extension for the
// Chrome Web Store: a manifest without "key" (the store refuses it) carrying
// the release's number, every file the manifest names, and no tests, Node
// files or the tests' hook into the worker (self.__tabbridgeTest, which only
// the end-to-end tests' build of the extension starts).
func TestReleaseExtensionZip(t *testing.T) {
	for _, tool := range []string{"jq", "zip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (scripts/release needs it)", tool)
		}
	}
	out := t.TempDir()
	if b, err := exec.Command("../../scripts/release", "--platforms", "", "--version", "v1.2.3", "--out", out).CombinedOutput(); err != nil {
		t.Fatalf("scripts/release: %v\n%s", err, b)
	}
	z, err := zip.OpenReader(filepath.Join(out, "tabbridge-extension.zip"))
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	files := map[string]bool{}
	var manifest map[string]any
	for _, f := range z.File {
		files[f.Name] = true
		if strings.Contains(f.Name, "test") || strings.HasSuffix(f.Name, "package.json") {
			t.Errorf("the zip holds %s", f.Name)
		}
		r, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r)
		r.Close()
		if strings.Contains(string(b), "__tabbridgeTest") {
			t.Errorf("%s holds the tests' hook __tabbridgeTest", f.Name)
		}
		if f.Name == "manifest.json" {
			if err := json.Unmarshal(b, &manifest); err != nil {
				t.Fatalf("manifest: %v", err)
			}
		}
	}
	if manifest == nil {
		t.Fatal("no manifest.json at the zip's root")
	}
	if _, ok := manifest["key"]; ok {
		t.Error(`the manifest keeps "key", which the Chrome Web Store refuses`)
	}
	if manifest["version"] != "1.2.3" {
		t.Errorf("manifest version %v, want 1.2.3", manifest["version"])
	}
	if sw := manifest["background"].(map[string]any)["service_worker"]; sw != "sw.js" {
		t.Errorf("the worker starts at %v, want sw.js", sw)
	}
	named := []string{manifest["background"].(map[string]any)["service_worker"].(string),
		manifest["action"].(map[string]any)["default_popup"].(string),
		manifest["options_ui"].(map[string]any)["page"].(string)}
	for _, icon := range manifest["icons"].(map[string]any) {
		named = append(named, icon.(string))
	}
	for _, n := range named {
		if !files[n] {
			t.Errorf("the manifest names %s, which the zip lacks", n)
		}
	}
}

// TestReleaseVersionIsStamped: the version scripts/release passes with
// -ldflags -X is what 'tabbridge version' prints.
func TestReleaseVersionIsStamped(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "tabbridge")
	if b, err := exec.Command("go", "build", "-ldflags", "-X main.version=v9.8.7", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, b)
	}
	b, err := exec.Command(bin, "version").Output()
	if err != nil || !strings.HasPrefix(string(b), "tabbridge v9.8.7 ") {
		t.Fatalf("version: %v %q", err, b)
	}
}
