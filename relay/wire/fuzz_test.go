package wire

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

func FuzzDecodeDaemon(f *testing.F) {
	f.Add(AppendDaemonOutput(nil, Output{Session: 3, Offset: 10, Data: []byte("hi")}))
	f.Add(AppendDaemonSnapshot(nil, Snapshot{Session: 1, Offset: 5, Cols: 80, Rows: 24, History: []byte("h\r\n"), Redraw: []byte("r")}))
	f.Add(AppendDaemonInput(nil, Input{Session: 2, Data: []byte{0x1b}}))
	f.Add([]byte{FrameSnapshot, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 80, 0, 24, 1, 0xff, 0xff, 0xff, 0xff})
	f.Add(AppendDaemonSnapshot(nil, Snapshot{Resync: true, Session: 1, Offset: 5, Cols: 80, Rows: 24}))
	f.Fuzz(func(t *testing.T, p []byte) {
		fr, err := DecodeDaemon(p)
		if err != nil {
			return
		}
		var again []byte
		switch {
		case fr.Output != nil:
			again = AppendDaemonOutput(nil, *fr.Output)
		case fr.Snapshot != nil:
			again = AppendDaemonSnapshot(nil, *fr.Snapshot)
		case fr.Input != nil:
			again = AppendDaemonInput(nil, *fr.Input)
		default:
			t.Fatal("decoded a frame with no field set")
		}
		if !bytes.Equal(again, p) {
			t.Fatalf("re-encoded %x, was %x", again, p)
		}
	})
}

func FuzzDecodeViewer(f *testing.F) {
	f.Add(AppendViewerOutput(nil, 7, []byte("out")))
	f.Add(AppendViewerSnapshot(nil, 7, 80, 24, []byte("\x1b[H")))
	f.Add(AppendViewerInput(nil, []byte("\x1b[A")))
	f.Fuzz(func(t *testing.T, p []byte) {
		fr, err := DecodeViewer(p)
		if err != nil {
			return
		}
		var again []byte
		switch {
		case fr.Output != nil:
			again = AppendViewerOutput(nil, fr.Output.Offset, fr.Output.Data)
		case fr.Snapshot != nil:
			again = AppendViewerSnapshot(nil, fr.Snapshot.Offset, fr.Snapshot.Cols, fr.Snapshot.Rows, fr.Snapshot.Redraw)
		case fr.Input != nil:
			again = AppendViewerInput(nil, fr.Input)
		default:
			t.Fatal("decoded a frame with no field set")
		}
		if !bytes.Equal(again, p) {
			t.Fatalf("re-encoded %x, was %x", again, p)
		}
	})
}

func FuzzDecodeControl(f *testing.F) {
	f.Add([]byte(`{"type":"session","index":1,"session":{"id":"a-1","command":["sh"],"cols":80,"rows":24}}`))
	f.Add([]byte(`{"type":"exit","index":1,"exitCode":3}`))
	f.Add([]byte(`{"type":"ack","bytes":100,"sessionId":"other"}`))
	f.Add([]byte(`{"type":"resize","cols":100,"rows":30}`))
	f.Add([]byte(`{"type":"redraw","index":4}`))
	f.Add([]byte(`{"type":"refused","index":2,"bytes":1048576,"reason":"<b>click here</b>"}`))
	f.Add([]byte(`{"type":"refused","index":2,"bytes":-1}`))
	f.Fuzz(func(t *testing.T, p []byte) {
		for _, dec := range []func([]byte) (Control, error){DecodeFromDaemon, DecodeFromServer, DecodeFromViewer} {
			c, err := dec(p)
			if err != nil {
				continue
			}
			if c.Type == TypeResize && (c.Cols < 1 || c.Rows < 1 || c.Cols > MaxCols || c.Rows > MaxRows) {
				t.Fatalf("accepted size %dx%d", c.Cols, c.Rows)
			}
			if c.Type == TypeSession && (c.Session == nil || !validID(c.Session.ID)) {
				t.Fatalf("accepted session %+v", c.Session)
			}
			if c.Type == TypeAck && c.Bytes < 0 {
				t.Fatalf("accepted ack %d", c.Bytes)
			}
		}
		if c, err := DecodeFromDaemon(p); err == nil && c.Type == TypeRefused && (c.Bytes <= 0 || c.Reason != "") {
			t.Fatalf("accepted a daemon's refusal %+v: a count that is not positive, or words a person would read", c)
		}
	})
}

// FuzzEncodeControl checks the invariant of every control frame: UTF-8 JSON text, whatever the
// daemon put in a session's command and directory (a viewer's browser fails the socket on a
// text frame that is not UTF-8).
func FuzzEncodeControl(f *testing.F) {
	f.Add("s1", "vim", "/home/a")
	f.Add("s\xff", "bad \xc3 byte", "/tmp/\xed\xa0\x80")
	f.Add("", "\u2028</script>", "\x00")
	f.Fuzz(func(t *testing.T, id, word, dir string) {
		for _, c := range []Control{
			{Type: TypeSession, Index: 1, Session: &SessionInfo{ID: id, Command: []string{word, word}, Dir: dir, Cols: 80, Rows: 24}},
			{Type: word, ExitCode: -1},
			{Type: TypeStatus, Online: true},
		} {
			if b := c.Encode(); !utf8.Valid(b) || !json.Valid(b) {
				t.Fatalf("control frame is not UTF-8 JSON text: %q", b)
			}
		}
	})
}
