package bridge

import (
	"bytes"
	"testing"
)

// The reader's cheap ping parse (pingID) and pong (encodePong) must be what
// Decode and encode make of the same frame, byte for byte; a frame pingID
// does not take goes to Decode unchanged.

var pingFrames = []string{
	`{"type":"ping","id":"p12"}`,
	`{"id":"p12","type":"ping"}`,
	`{"type":"ping"}`,
	`{"type":"ping","id":""}`,
	`{"type":"ping","id":"a<b>&c"}`,
	`{"type":"ping","id":"0123456789012345678901234567890123456789012345678901234567890123"}`,
	"{\"id\":\"p1\",\"type\":\"ping\"}\n", // as encoding/json's Encoder writes it
	" \t{\"type\":\"ping\",\"id\":\"p1\"}\r\n",
	// Not taken: Decode decides.
	`{"type":"ping","id":"01234567890123456789012345678901234567890123456789012345678901234"}`,
	`{"type":"ping","id":"p\u0031"}`,
	`{"type":"ping","id":"p\n"}`,
	`{"type":"ping","id":"é"}`,
	`{"type":"ping","type":"ping"}`,
	`{"type":"ping","id":"a","id":"b"}`,
	`{"TYPE":"ping","id":"p1"}`,
	`{"type":"ping","id":1}`,
	`{"type":"ping","id":null}`,
	`{"type":"ping", "id":"p1"}`,
	"\v{\"type\":\"ping\",\"id\":\"p1\"}",
	`{"type":"ping","id":"p1","x":1}`,
	`{"type":"pong","id":"p1"}`,
	`{"id":"p1"}`,
	`{"type":"ping",}`,
	`{"type":"ping","id":"p1"`,
	`{}`,
	`{"type":"call.result","callId":"c1","ok":true,"result":{}}`,
}

func TestPingIDIsDecodes(t *testing.T) {
	taken := 0
	for _, f := range pingFrames {
		if checkPingID(t, []byte(f)) {
			taken++
		}
	}
	if taken != 8 {
		t.Fatalf("pingID took %d of the frames, want the 8 of the extension's shape", taken)
	}
}

// checkPingID reports whether pingID took frame, failing t if Decode reads
// it otherwise.
func checkPingID(t *testing.T, frame []byte) bool {
	t.Helper()
	id, ok := pingID(frame)
	if !ok {
		return false
	}
	in, err := Decode(frame)
	if err != nil || in.Type != TypePing || in.ID != id {
		t.Fatalf("pingID(%q) = %q, but Decode gives %+v, %v", frame, id, in, err)
	}
	return true
}

func FuzzPingID(f *testing.F) {
	for _, s := range pingFrames {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		checkPingID(t, frame)
		if id, ok := pingID(frame); ok {
			checkPong(t, id, 1700000000000)
		}
	})
}

func TestEncodePongIsEncode(t *testing.T) {
	for _, id := range []string{"", "p1", "a<b", "x&y", "q\"", "b\\s", "é", "\u2028", "\x00", "\xff", "0123456789012345678901234567890123456789012345678901234567890123"} {
		for _, ms := range []int64{0, -1, 1700000000123} {
			checkPong(t, id, ms)
		}
	}
}

func FuzzEncodePong(f *testing.F) {
	f.Add("p1", int64(1))
	f.Add("<\xff", int64(-5))
	f.Fuzz(checkPong)
}

func checkPong(t *testing.T, id string, ms int64) {
	got, want := encodePong(id, ms), encode(pongMsg{Type: TypePong, ID: id, Time: ms})
	if !bytes.Equal(got, want) {
		t.Fatalf("encodePong(%q, %d) = %s, encode gives %s", id, ms, got, want)
	}
}

func TestOffStackRaisesPanicInCaller(t *testing.T) {
	defer func() {
		if r := recover(); r != "boom" {
			t.Fatalf("recovered %v, want the panic of f", r)
		}
	}()
	OffStack(func() { panic("boom") })
	t.Fatal("OffStack returned after f panicked")
}

func TestOffStackRunsFBeforeReturning(t *testing.T) {
	ran := false
	OffStack(func() { ran = true })
	if !ran {
		t.Fatal("OffStack returned before f ran")
	}
}

func TestOffReaderTakesTheCatalogsFrames(t *testing.T) {
	for f, want := range map[string]bool{
		`{"type":"call.result","callId":"c1"}`:           false,
		`{"callId":"c1","ok":true,"type":"call.result"}`: false,
		`{"type":"call.dispatched","callId":"c1"}`:       false,
		`{"type":"tools.announce","documentId":"d"}`:     true,
		`{"type":"sites.open","sites":[]}`:               true,
		`{"type":"document.used","documentId":"d"}`:      true,
		`{"type":"document.gone","documentId":"d"}`:      true,
		`{"type":"ping","id":"p1"}`:                      false,
		`{"type":"tools.`:                                false,
	} {
		if got := offReader([]byte(f)); got != want {
			t.Errorf("offReader(%s) = %v, want %v", f, got, want)
		}
	}
}

// BenchmarkRouteCallResult is what routing adds to a call's answer on the reader: the ping
// parse that does not take it, and the look at its start that keeps it there.
func BenchmarkRouteCallResult(b *testing.B) {
	frame := []byte(`{"type":"call.result","callId":"0193a4b2-7c1d-7000-8000-000000000001","ok":true,"result":{"content":[{"type":"text","text":"done"}]}}`)
	for b.Loop() {
		if _, ok := pingID(frame); ok || offReader(frame) {
			b.Fatal("a call's result routed off the reader")
		}
	}
}

// BenchmarkPing compares the reader's ping parse and pong with Decode and encode.
func BenchmarkPing(b *testing.B) {
	frame := []byte(`{"type":"ping","id":"p123"}`)
	b.Run("pingID+encodePong", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			id, _ := pingID(frame)
			encodePong(id, 1700000000000)
		}
	})
	b.Run("Decode+encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			in, _ := Decode(frame)
			encode(pongMsg{Type: TypePong, ID: in.ID, Time: 1700000000000})
		}
	})
}
