package tabbridge_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestEveryMessageTypeIsDocumented: each message type a socket carries (the
// Type… string constants of the extension's protocol in bridge and of the
// terminals' in relay/wire) is named in its protocol document, so a message
// added in code cannot be missing from the reference its other end is
// written against.
func TestEveryMessageTypeIsDocumented(t *testing.T) {
	for dir, doc := range map[string]string{"bridge": "docs/PROTOCOL.md", "relay/wire": "docs/PROTOCOL-terminals.md"} {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		types := messageTypes(t, dir)
		if len(types) == 0 {
			t.Fatalf("no Type… constants in %s", dir)
		}
		for name, value := range types {
			if !strings.Contains(string(text), "`"+value+"`") && !strings.Contains(string(text), `"`+value+`"`) {
				t.Errorf("%s.%s (%q) is not named in %s", dir, name, value, doc)
			}
		}
	}
}

// messageTypes is the string constants named Type… in the non-test Go files
// of dir.
func messageTypes(t *testing.T, dir string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if !strings.HasPrefix(name.Name, "Type") || i >= len(vs.Values) {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						v, _ := strconv.Unquote(lit.Value)
						out[name.Name] = v
					}
				}
			}
		}
	}
	return out
}
