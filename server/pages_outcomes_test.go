package server

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestEveryOutcomeHasALabel reads every Outcome* constant the call path
// records (sitetools) and checks the audit page names and colours each one,
// so a new outcome cannot reach the page as a bare code.
func TestEveryOutcomeHasALabel(t *testing.T) {
	files, err := filepath.Glob("../sitetools/*.go")
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			spec, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, name := range spec.Names {
				if !strings.HasPrefix(name.Name, "Outcome") || i >= len(spec.Values) {
					continue
				}
				lit, ok := spec.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				v, _ := strconv.Unquote(lit.Value)
				found++
				if _, ok := outcomes[v]; !ok {
					t.Errorf("sitetools.%s (%q) has no label or colour on the audit page", name.Name, v)
				}
			}
			return true
		})
	}
	if found < 7 {
		t.Fatalf("found only %d Outcome constants in sitetools", found)
	}
	if len(outcomes) != found {
		t.Errorf("the audit page labels %d outcomes, sitetools records %d", len(outcomes), found)
	}
}
