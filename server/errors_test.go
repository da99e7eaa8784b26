package server

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestErrorCodesAreDocumented checks the error codes both ways: every code
// constant in errors.go has a row in docs/API.md's table of error codes, and
// every code the table names is a constant; and no error is built with a
// code written out as a string instead of its constant.
func TestErrorCodesAreDocumented(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	constants := map[string]string{} // name → code
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.ValueSpec:
				for i, id := range x.Names {
					if strings.HasPrefix(id.Name, "code") && i < len(x.Values) {
						if lit, ok := x.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							constants[id.Name], _ = strconv.Unquote(lit.Value)
						}
					}
				}
			case *ast.CallExpr:
				if lit := codeLiteral(x); lit != nil {
					t.Errorf("%s: error code %s written out; use its constant from errors.go", fset.Position(lit.Pos()), lit.Value)
				}
			}
			return true
		})
	}
	documented := documentedCodes(t)
	var codes []string
	for name, code := range constants {
		codes = append(codes, code)
		if !slices.Contains(documented, code) {
			t.Errorf("%s (%q) is not in the table of error codes in docs/API.md", name, code)
		}
	}
	for _, code := range documented {
		if !slices.Contains(codes, code) {
			t.Errorf("docs/API.md documents the error code %q, which errors.go does not declare", code)
		}
	}
	if len(constants) == 0 {
		t.Fatal("found no code constants in errors.go")
	}
}

// codeLiteral returns the code argument of errorf or badRequest when it is a
// string literal.
func codeLiteral(call *ast.CallExpr) *ast.BasicLit {
	fn, ok := call.Fun.(*ast.Ident)
	if !ok {
		return nil
	}
	var arg ast.Expr
	switch {
	case fn.Name == "errorf" && len(call.Args) > 1:
		arg = call.Args[1]
	case fn.Name == "badRequest" && len(call.Args) > 0:
		arg = call.Args[0]
	default:
		return nil
	}
	lit, _ := arg.(*ast.BasicLit)
	return lit
}

// documentedCodes reads the codes in the second column of the table under
// "| status | code | when |" in docs/API.md.
func documentedCodes(t *testing.T) []string {
	t.Helper()
	doc, err := os.ReadFile("../docs/API.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "| status | code | when |\n")
	if !ok {
		t.Fatal("docs/API.md has no table of error codes")
	}
	code := regexp.MustCompile("`([a-z_]+)`")
	var out []string
	for _, row := range strings.Split(table, "\n") {
		cells := strings.Split(row, "|")
		if !strings.HasPrefix(row, "|") || len(cells) < 4 {
			break
		}
		for _, m := range code.FindAllStringSubmatch(cells[2], -1) {
			if !slices.Contains(out, m[1]) {
				out = append(out, m[1])
			}
		}
	}
	return out
}
