package server

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/sitetools"
)

// FuzzDecodeInvokeIn: a forwarded call is another instance's body. A
// refusal says what is wrong; an accepted call names the person, the call,
// its site and tool and when it ends, and reads back the same once encoded
// again (what the calling instance sends is what this one runs).
func FuzzDecodeInvokeIn(f *testing.F) {
	good, _ := json.Marshal(invokeIn{User: "u1", Invocation: sitetools.Invocation{ID: "c1", Site: "https://shop.example", Tool: "search",
		Arguments: json.RawMessage(`{"q":"tea"}`), Targets: []sitetools.Target{{BrowserID: "b1", DocumentID: "d1"}}, LastURL: "https://shop.example/s",
		Deadline: time.Unix(1700000000, 5).UTC(), Gate: "read-only"}})
	f.Add(good)
	f.Add(append(append([]byte{}, good...), good...))
	f.Add([]byte(`{"user":"u1","invocation":{"ID":"c1","Site":"s","Tool":"t"}}`))
	f.Add([]byte(`{"user":"u1","invocation":{"ID":"c1","Site":"s","Tool":"t","Deadline":"2026-01-01T00:00:00Z","Arguments":[1]}}`))
	f.Add([]byte(`{"user":"","invocation":{}}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"user":1}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		in, err := decodeInvokeIn(bytes.NewReader(body))
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "the body ") && !strings.HasPrefix(msg, "it") {
				t.Fatalf("decodeInvokeIn(%q): %q says nothing of what is wrong", body, msg)
			}
			return
		}
		inv := in.Invocation
		if in.User == "" || inv.ID == "" || inv.Site == "" || inv.Tool == "" || inv.Deadline.IsZero() || len(body) > maxInvokeBody {
			t.Fatalf("decodeInvokeIn(%q) accepted %+v", body, in)
		}
		again, err := json.Marshal(in)
		if err != nil {
			t.Fatalf("decodeInvokeIn(%q) accepted %+v, which does not encode: %v", body, in, err)
		}
		back, err := decodeInvokeIn(bytes.NewReader(again))
		if err != nil {
			t.Fatalf("%q read as %+v, encoded %q, refused: %v", body, in, again, err)
		}
		b2, _ := json.Marshal(back)
		if !bytes.Equal(b2, again) || !back.Invocation.Deadline.Equal(inv.Deadline) {
			t.Fatalf("round trip: %s became %s", again, b2)
		}
	})
}

// TestForwardedBodiesAreReadOneWay: a forwarded call without a deadline (it
// would end at once, as a timeout), two calls in one body, a body over the
// limit, and a targets request without a person are each refused naming
// what is wrong.
func TestForwardedBodiesAreReadOneWay(t *testing.T) {
	for body, want := range map[string]string{
		`{"user":"u1","invocation":{"ID":"c1","Site":"s","Tool":"t"}}`:                                                                                            "no Deadline",
		`{"user":"u1","invocation":{"ID":"c1","Site":"s","Tool":"t","Deadline":"2030-01-01T00:00:00Z"}} {"user":"u2"}`:                                            "more than one JSON value",
		`{"user":"u1","invocation":{"ID":"c1","Site":"s","Tool":"t","Deadline":"2030-01-01T00:00:00Z","Arguments":"` + strings.Repeat("a", maxInvokeBody) + `"}}`: "over 8388608 bytes",
		`{"user":"u1","invocation":{"ID":"c1"}}`: "no ID, Site or Tool",
	} {
		if _, err := decodeInvokeIn(strings.NewReader(body)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("decodeInvokeIn(%.80s…) = %v, want %q", body, err, want)
		}
	}
	var in targetsIn
	if err := decodeInternalBody(strings.NewReader(`{"user":"u1","origin":"https://a.example"}x`), 1<<20, &in); err == nil {
		t.Error("a targets request with trailing bytes was read")
	}
}
