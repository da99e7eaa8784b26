package tabbridge_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// eachSource parses every non-test Go file of the module (run from its root)
// in mode and hands it to fn; a file that does not parse fails the test.
func eachSource(t *testing.T, mode parser.Mode, fn func(path string, fset *token.FileSet, f *ast.File)) {
	t.Helper()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "testdata") && path != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, mode)
		if err != nil {
			return err
		}
		fn(path, fset, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestPackageDocs checks that every package says what it owns: each
// directory of non-test Go files has a package doc comment in one of them.
// A package without one leaves its reader to guess its boundaries.
func TestPackageDocs(t *testing.T) {
	dirs := map[string]bool{} // directory → has a doc comment
	eachSource(t, parser.PackageClauseOnly|parser.ParseComments, func(path string, _ *token.FileSet, f *ast.File) {
		dir := filepath.Dir(path)
		dirs[dir] = dirs[dir] || (f.Doc != nil && strings.TrimSpace(f.Doc.Text()) != "")
	})
	if len(dirs) < 10 {
		t.Fatalf("found only %d packages: is the test running at the module root?", len(dirs))
	}
	for dir, ok := range dirs {
		if !ok {
			t.Errorf("package in %s has no doc comment: say what it owns and what it does not (STYLE.md rule 3)", dir)
		}
	}
}
