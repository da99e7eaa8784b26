package server

import (
	"strings"
	"testing"

	"github.com/tabbridge/tabbridge/internal/testutil"
)

// deepBody is a JSON-RPC message of about 4 MiB whose _meta nests objects 9,000 deep, each
// level carrying 400 bytes: the SDK refuses it (deeper than 1000), after the prelude read it.
func deepBody() []byte {
	const depth = 9000
	pad := strings.Repeat("x", 400)
	var b strings.Builder
	b.WriteString(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"listTasks","arguments":{},"_meta":`)
	for range depth {
		b.WriteString(`{"p":"` + pad + `","a":`)
	}
	b.WriteString("1")
	b.WriteString(strings.Repeat("}", depth))
	b.WriteString("}}")
	return []byte(b.String())
}

// TestPreludeReadsDeepParamsInOnePass: reading a message is linear in its size, however deep
// it nests. Looking for names given twice by splitting each object anew read every level's
// rest again: ~20 GB of scanning for this 4 MiB body, tens of CPU seconds for one POST.
// Measured in CPU time, so the load of the machine does not decide it.
func TestPreludeReadsDeepParamsInOnePass(t *testing.T) {
	body := deepBody()
	start := testutil.CPUTime()
	if _, f := parseMCPBody(body); f != nil {
		t.Fatalf("refused: %s", f.err.Message)
	}
	if used := testutil.CPUTime() - start; used > 2e9 {
		t.Fatalf("reading a %d-byte message took %v of CPU", len(body), used)
	}
}
