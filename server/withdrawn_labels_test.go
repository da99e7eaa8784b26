package server

import (
	"go/ast"
	"go/parser"
	"go/token"
	"testing"

	"github.com/tabbridge/tabbridge/approvals"
)

// TestEveryWithdrawReasonReadsAsASentence: each reason the gate can record (every
// WithdrawReason constant in approvals.go) has words on the person's pages, so a new
// reason cannot show as a bare "Withdrawn".
func TestEveryWithdrawReasonReadsAsASentence(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "../approvals/approvals.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	ast.Inspect(f, func(node ast.Node) bool {
		vs, ok := node.(*ast.ValueSpec)
		if !ok || vs.Type == nil {
			return true
		}
		if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "WithdrawReason" {
			return true
		}
		for _, v := range vs.Values {
			lit, ok := v.(*ast.BasicLit)
			if !ok {
				continue
			}
			n++
			reason := approvals.WithdrawReason(lit.Value[1 : len(lit.Value)-1])
			if withdrawnLabels[reason] == "" {
				t.Errorf("withdrawal reason %q has no label in withdrawnLabels", reason)
			}
		}
		return true
	})
	if n < 6 {
		t.Fatalf("found %d withdrawal reasons in approvals.go; the parse is wrong", n)
	}
}
