package store

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestTransactionsGoPastTheStatementCache keeps every transaction of the
// package on txDirect: one begun through gorm's prepared-statement cache can
// deadlock SQLite's one connection against a statement being prepared
// (prepared_test.go shows how). A new .Transaction( or .Begin( call anywhere
// else in the package's code fails here with where it is.
func TestTransactionsGoPastTheStatementCache(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				switch {
				case sel.Sel.Name == "Transaction" && fn.Name.Name == "txDirect":
				case sel.Sel.Name == "Begin" && fn.Name.Name == "run" && name == "auditbatch.go": // the audit writer's own *sql.DB, no gorm
				case sel.Sel.Name == "Transaction", sel.Sel.Name == "Begin", sel.Sel.Name == "BeginTx":
					t.Errorf("%s: %s begins a transaction with %s; use db.txDirect (or InWorkspace), which goes past gorm's statement cache", fset.Position(call.Pos()), fn.Name.Name, sel.Sel.Name)
				}
				return true
			})
		}
	}
}
