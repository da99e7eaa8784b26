package tabbridge_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestTransactionCallbacksUseOnlyTheirTx keeps every transaction's callback
// on its own tx. A function literal given a *gorm.DB or *sql.Tx (what
// txDirect, InWorkspace and gorm's Transaction hand their fn) that reaches
// for a database handle from outside it asks the pool for a second
// connection while the transaction holds one: on SQLite's single connection
// that waits for good (docs/DECISIONS.md, "Nothing holds the connection
// while asking for another"). A handle here is the store's *DB, a *gorm.DB,
// *sql.DB or *sql.Conn declared outside the literal (or made from one by
// WithContext, Session or Debug), or a field named DB of something declared
// outside it (s.opts.DB). It reads the code's syntax only: a helper that
// takes tx and uses the pool inside, or a callback the store calls holding
// the connection (TaskChange.Allow), is beyond it.
func TestTransactionCallbacksUseOnlyTheirTx(t *testing.T) {
	callbacks := 0
	eachSource(t, 0, func(_ string, fset *token.FileSet, f *ast.File) {
		n, found := outerHandles(fset, f)
		callbacks += n
		for _, msg := range found {
			t.Error(msg)
		}
	})
	if callbacks < 12 { // 12 when written: the store's 11 and approvals' open
		t.Fatalf("found only %d transaction callbacks: is the test running at the module root?", callbacks)
	}
}

// TestOuterHandlesFindsThePattern runs the check on code written to break the
// rule in each way it knows, beside code that keeps it, so that a check that
// finds nothing in the repository is known to be looking.
func TestOuterHandlesFindsThePattern(t *testing.T) {
	const src = `package p

func (db *DB) receiver(ctx context.Context) error {
	return db.txDirect(ctx, func(tx *gorm.DB) error {
		return db.WithContext(ctx).Create(x).Error // bad: receiver
	})
}

func (db *DB) derived(ctx context.Context) error {
	q := db.WithContext(ctx).Session(&gorm.Session{})
	return db.txDirect(ctx, func(tx *gorm.DB) error {
		return q.Find(&x).Error // bad: made from the receiver
	})
}

func (g *Gate) field(ctx context.Context) error {
	return g.opts.DB.InWorkspace(ctx, id, func(tx *gorm.DB) error {
		return g.opts.DB.Find(&x).Error // bad: a field named DB
	})
}

func param(ctx context.Context, pool *sql.DB, gdb *gorm.DB) error {
	var other *store.DB
	gdb.Transaction(func(tx *gorm.DB) error {
		_ = other.Ping(ctx) // bad: a declared *store.DB
		return nil
	})
	return run(func(tx *sql.Tx) error {
		_, err := pool.Exec("SELECT 1") // bad: a *sql.DB parameter
		return err
	})
}

func (db *DB) clean(ctx context.Context, n NewTask, c TaskChange) error {
	u := newUser()
	res := db.WithContext(ctx).Model(&User{}).Update("x", 1)
	return db.txDirect(ctx, func(tx *gorm.DB) error {
		if err := roomForOpenTask(tx, n.WorkspaceID, n.OpenMax); err != nil {
			return err
		}
		q := tx.Model(&Task{})
		_ = tx.Statement.DB
		_ = c.Allow
		_ = res.RowsAffected
		var s *store.DB
		_ = s
		return q.Create(u).Error
	})
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	n, found := outerHandles(fset, f)
	var lines []int
	for _, msg := range found {
		var line int
		if _, err := fmt.Sscanf(msg, "p.go:%d:", &line); err != nil {
			t.Fatalf("unexpected message %q", msg)
		}
		lines = append(lines, line)
	}
	if want := []int{5, 12, 18, 25, 29}; n != 6 || !slices.Equal(lines, want) {
		t.Errorf("found %d callbacks and handles on lines %v, want 6 and %v:\n%s", n, lines, want, strings.Join(found, "\n"))
	}
}

// outerHandles returns how many transaction callbacks f has, and a message
// for each database handle from outside one that one uses.
func outerHandles(fset *token.FileSet, f *ast.File) (int, []string) {
	n := 0
	var found []string
	ast.Inspect(f, func(node ast.Node) bool {
		lit, ok := node.(*ast.FuncLit)
		if !ok || !takesTx(lit) {
			return true
		}
		n++
		outside := func(id *ast.Ident) bool {
			return id != nil && id.Obj != nil && id.Obj.Decl != nil &&
				(id.Obj.Pos() < lit.Pos() || id.Obj.Pos() >= lit.End())
		}
		ast.Inspect(lit.Body, func(node ast.Node) bool {
			switch e := node.(type) {
			case *ast.SelectorExpr:
				if root := rootIdent(e); e.Sel.Name == "DB" && outside(root) {
					found = append(found, fmt.Sprintf("%s: a transaction's callback (%s) uses %s, which asks the pool for another connection while the transaction holds one; use the callback's tx",
						fset.Position(e.Pos()), fset.Position(lit.Pos()), exprText(e)))
					return false
				}
			case *ast.Ident:
				if outside(e) && isHandle(e.Obj, 0) {
					found = append(found, fmt.Sprintf("%s: a transaction's callback (%s) uses %s, a database handle from outside it, which asks the pool for another connection while the transaction holds one; use the callback's tx",
						fset.Position(e.Pos()), fset.Position(lit.Pos()), e.Name))
				}
			}
			return true
		})
		return true
	})
	return n, found
}

// takesTx reports whether lit has a parameter of type *gorm.DB or *sql.Tx.
func takesTx(lit *ast.FuncLit) bool {
	for _, p := range lit.Type.Params.List {
		if typeIs(p.Type, "gorm", "DB") || typeIs(p.Type, "sql", "Tx") {
			return true
		}
	}
	return false
}

// isHandle reports whether obj is declared as a database handle, or made
// from one by a method that returns a new handle.
func isHandle(obj *ast.Object, depth int) bool {
	if obj.Kind != ast.Var || depth > 8 {
		return false
	}
	switch d := obj.Decl.(type) {
	case *ast.Field:
		return handleType(d.Type)
	case *ast.ValueSpec:
		if d.Type != nil {
			return handleType(d.Type)
		}
		if i := slices.IndexFunc(d.Names, func(id *ast.Ident) bool { return id.Obj == obj }); i >= 0 && len(d.Values) == len(d.Names) {
			return handleExpr(d.Values[i], depth+1)
		}
	case *ast.AssignStmt:
		i := slices.IndexFunc(d.Lhs, func(e ast.Expr) bool { id, ok := e.(*ast.Ident); return ok && id.Obj == obj })
		if i >= 0 && len(d.Rhs) == len(d.Lhs) {
			return handleExpr(d.Rhs[i], depth+1)
		}
	}
	return false
}

// handleExpr reports whether e is a handle: one, a field named DB, or a new
// session made from one.
func handleExpr(e ast.Expr, depth int) bool {
	switch e := e.(type) {
	case *ast.ParenExpr:
		return handleExpr(e.X, depth)
	case *ast.Ident:
		return e.Obj != nil && isHandle(e.Obj, depth)
	case *ast.SelectorExpr:
		return e.Sel.Name == "DB"
	case *ast.CallExpr:
		if sel, ok := e.Fun.(*ast.SelectorExpr); ok && slices.Contains([]string{"WithContext", "Session", "Debug"}, sel.Sel.Name) {
			return handleExpr(sel.X, depth)
		}
	}
	return false
}

// handleType reports whether t is *DB (the store's), *store.DB, *gorm.DB,
// *sql.DB or *sql.Conn.
func handleType(t ast.Expr) bool {
	if star, ok := t.(*ast.StarExpr); ok {
		if id, ok := star.X.(*ast.Ident); ok && id.Name == "DB" {
			return true
		}
	}
	return typeIs(t, "store", "DB") || typeIs(t, "gorm", "DB") || typeIs(t, "sql", "DB") || typeIs(t, "sql", "Conn")
}

// typeIs reports whether t is *pkg.name.
func typeIs(t ast.Expr, pkg, name string) bool {
	star, ok := t.(*ast.StarExpr)
	if !ok {
		return false
	}
	sel, ok := star.X.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	return ok && id.Name == pkg && sel.Sel.Name == name
}

// rootIdent is the identifier a chain of selectors and calls starts from
// (g in g.opts.DB), or nil.
func rootIdent(e ast.Expr) *ast.Ident {
	for {
		switch x := e.(type) {
		case *ast.Ident:
			return x
		case *ast.SelectorExpr:
			e = x.X
		case *ast.CallExpr:
			e = x.Fun
		case *ast.ParenExpr:
			e = x.X
		default:
			return nil
		}
	}
}

// exprText writes a selector chain as it reads (g.opts.DB).
func exprText(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return exprText(x.X) + "." + x.Sel.Name
	case *ast.CallExpr:
		return exprText(x.Fun) + "(…)"
	case *ast.ParenExpr:
		return "(" + exprText(x.X) + ")"
	}
	return "…"
}

// TestTransactionsGoPastTheStatementCache keeps every transaction of the
// module on the store's txDirect: one begun through gorm's prepared-statement
// cache can deadlock SQLite's one connection against a statement being
// prepared (store/prepared_test.go shows how). A .Transaction(, .Begin( or
// .BeginTx( call anywhere else fails here with where it is; the audit
// writer's batches begin on its own *sql.DB, which has no such cache.
func TestTransactionsGoPastTheStatementCache(t *testing.T) {
	allowed := map[string]string{"store/store.go": "txDirect", "store/auditbatch.go": "run"}
	begins := 0
	eachSource(t, 0, func(path string, fset *token.FileSet, f *ast.File) {
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
				if !ok || !slices.Contains([]string{"Transaction", "Begin", "BeginTx"}, sel.Sel.Name) {
					return true
				}
				begins++
				if allowed[filepath.ToSlash(path)] != fn.Name.Name {
					t.Errorf("%s: %s begins a transaction with %s; use the store's txDirect (or InWorkspace), which goes past gorm's statement cache", fset.Position(call.Pos()), fn.Name.Name, sel.Sel.Name)
				}
				return true
			})
		}
	})
	if begins < 2 { // txDirect's and the audit writer's
		t.Fatalf("found only %d transactions begun: is the test running at the module root?", begins)
	}
}
