package e2e

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// hookWorker is where the tests' build of the extension starts its worker: extension/testhook.js
// imports the real sw.js and adds self.__tabbridgeTest, the tests' way in. The shipped extension
// has no such hook (scripts/release leaves testhook.js out; cmd/tabbridge's release test checks).
const hookWorker = "testhook.js"

// testExtension assembles the extension the tests load, in a directory removed when the test ends:
// a copy of extension/ whose manifest starts the worker at hookWorker. Everything else, the "key"
// (and so ExtensionID) included, is the shipped extension's.
func testExtension(t testing.TB) string {
	t.Helper()
	src := repoPath(t, "extension")
	dst := filepath.Join(t.TempDir(), "extension")
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			if d.Name() == "node_modules" {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatalf("copy the extension: %v", err)
	}
	manifest := filepath.Join(dst, "manifest.json")
	b, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("extension manifest: %v", err)
	}
	bg, ok := m["background"].(map[string]any)
	if !ok || bg["service_worker"] != "sw.js" {
		t.Fatalf("extension manifest: background %v, want the worker sw.js", m["background"])
	}
	bg["service_worker"] = hookWorker
	if b, err = json.MarshalIndent(m, "", "  "); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(manifest, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}
