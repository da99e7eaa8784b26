package daemon

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/tabbridge/tabbridge/relay/wire"
)

// FuzzDecodeStartRequest: whatever line reaches the control socket, a
// refusal says what is wrong, and an accepted request has a command within
// the wire's limits and a size it can carry, and reads back the same once
// encoded again.
func FuzzDecodeStartRequest(f *testing.F) {
	for _, s := range []string{
		`{"argv":["sh","-c","echo started; exit 3"],"dir":"/tmp","env":["HOME=/root"],"cols":100,"rows":40}`,
		`{"argv":["true"]}`, `{"argv":["true"],"cols":1001,"rows":24}`, `{"argv":["true"],"cols":-1,"rows":5}`,
		`{"argv":[""]}`, `{}`, `null`, `[]`, `{"argv":["ls"],"cwd":"/"}`, `{"argv":"ls"}`, `{"argv":["a"]}x`,
		`{"argv":["\u0000"],"dir":"\ud800"}`, `{"argv":["a"],"argv":["b"]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		spec, err := decodeStartRequest(line)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("decodeStartRequest(%q): an empty error", line)
			}
			return
		}
		if len(spec.Argv) == 0 || spec.Argv[0] == "" || len(spec.Argv) > wire.MaxArgs {
			t.Fatalf("decodeStartRequest(%q) accepted command %q", line, spec.Argv)
		}
		if spec.Cols < 1 || spec.Rows < 1 || spec.Cols > wire.MaxCols || spec.Rows > wire.MaxRows {
			t.Fatalf("decodeStartRequest(%q) accepted size %dx%d", line, spec.Cols, spec.Rows)
		}
		if err := checkSpec(spec); err != nil {
			t.Fatalf("decodeStartRequest(%q) accepted what checkSpec refuses: %v", line, err)
		}
		again, err := encodeStartRequest(StartRequest{Argv: spec.Argv, Dir: spec.Dir, Env: spec.Env, Cols: spec.Cols, Rows: spec.Rows})
		if err != nil {
			t.Fatalf("decodeStartRequest(%q) accepted %+v, which does not encode: %v", line, spec, err)
		}
		back, err := decodeStartRequest(again)
		if err != nil || !reflect.DeepEqual(back, spec) {
			t.Fatalf("round trip of %q: %+v became %+v (%v)", line, spec, back, err)
		}
	})
}

// FuzzEncodeStartRequest: what `tabbridge run` sends is either refused
// before it leaves, naming what cannot go, or read by the daemon as exactly
// the command, directory and environment that were asked for.
func FuzzEncodeStartRequest(f *testing.F) {
	f.Add("sh", "-c", "/tmp", "HOME=/root", 80, 24)
	f.Add("cat", "caf\xe9.txt", "/", "A=1", 0, 0)
	f.Add("ls", "", "/tmp/\xff", "BAD=\xfe", 100, 40)
	f.Add("echo", "\u2028\x00", "", "", -1, 2000)
	f.Fuzz(func(t *testing.T, cmd, arg, dir, env string, cols, rows int) {
		req := StartRequest{Argv: []string{cmd, arg}, Dir: dir, Env: []string{env}, Cols: cols, Rows: rows}
		b, err := encodeStartRequest(req)
		if err != nil {
			if !strings.Contains(err.Error(), "UTF-8") && !strings.Contains(err.Error(), "limit") {
				t.Fatalf("encodeStartRequest(%+v): %v says nothing of what cannot go", req, err)
			}
			return
		}
		if !bytes.HasSuffix(b, []byte("\n")) || bytes.Count(b, []byte("\n")) != 1 {
			t.Fatalf("encodeStartRequest(%+v) = %q is not one line", req, b)
		}
		spec, err := decodeStartRequest(bytes.TrimSuffix(b, []byte("\n")))
		if err != nil {
			return // the daemon's refusal, in words (FuzzDecodeStartRequest)
		}
		if !reflect.DeepEqual(spec.Argv, req.Argv) || spec.Dir != dir || !reflect.DeepEqual(spec.Env, req.Env) {
			t.Fatalf("sent %+v as %q, the daemon read %+v", req, b, spec)
		}
	})
}
