// Package wire owns the bytes on Tabbridge's two terminal sockets: the
// daemon's (/ws/daemon) and a viewer's (/ws/viewer). Terminal bytes travel in
// binary frames with a small fixed header; control travels as JSON text
// frames with a "type". docs/PROTOCOL-terminals.md describes every message.
//
// Every decoder here reads untrusted input (a daemon speaks only for its own
// machine, a viewer only for the session its ticket names) and refuses what
// it does not understand with an error; none of them panics. It knows nothing
// of sockets, sessions or HTTP.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Binary frame types. A frame's first byte is its type.
const (
	// FrameOutput carries one or more whole output batches.
	FrameOutput byte = 0x01
	// FrameSnapshot carries a redraw of a session's screen.
	FrameSnapshot byte = 0x02
	// FrameInput carries a viewer's keystrokes, exactly as typed.
	FrameInput byte = 0x10
)

// ErrFrame is returned for a frame that is too short, of an unknown type, or
// whose lengths do not add up.
var ErrFrame = errors.New("wire: malformed frame")

// Output is a run of output bytes at Offset of a session's stream. On the
// daemon socket Session is the daemon's index of the session; on a viewer
// socket it is zero and not sent.
type Output struct {
	Session uint32
	Offset  int64
	Data    []byte
}

// Snapshot is a session's screen at Offset. On the daemon socket History
// and Redraw are separate (the server sends a fresh viewer both, a viewer
// that fell behind only the redraw); on a viewer socket Data is the bytes to
// write, after resizing the terminal to Cols×Rows.
type Snapshot struct {
	// Resync (daemon socket only) says the snapshot replaces output the
	// daemon discarded: nothing before Offset will follow it.
	Resync     bool
	Session    uint32
	Offset     int64
	Cols, Rows int
	History    []byte
	Redraw     []byte
}

// Input is keystrokes for a session.
type Input struct {
	Session uint32
	Data    []byte
}

const (
	daemonOutputHeader   = 1 + 4 + 8
	daemonSnapshotHeader = 1 + 4 + 8 + 2 + 2 + 1 + 4
	daemonInputHeader    = 1 + 4
	viewerOutputHeader   = 1 + 8
	viewerSnapshotHeader = 1 + 8 + 2 + 2
)

// AppendDaemonOutput encodes an output frame for the daemon socket.
func AppendDaemonOutput(b []byte, o Output) []byte {
	b = append(b, FrameOutput)
	b = binary.BigEndian.AppendUint32(b, o.Session)
	b = binary.BigEndian.AppendUint64(b, uint64(o.Offset))
	return append(b, o.Data...)
}

// AppendDaemonSnapshot encodes a snapshot frame for the daemon socket.
func AppendDaemonSnapshot(b []byte, s Snapshot) []byte {
	b = append(b, FrameSnapshot)
	b = binary.BigEndian.AppendUint32(b, s.Session)
	b = binary.BigEndian.AppendUint64(b, uint64(s.Offset))
	b = binary.BigEndian.AppendUint16(b, uint16(s.Cols))
	b = binary.BigEndian.AppendUint16(b, uint16(s.Rows))
	var flags byte
	if s.Resync {
		flags = 1
	}
	b = append(b, flags)
	b = binary.BigEndian.AppendUint32(b, uint32(len(s.History)))
	b = append(b, s.History...)
	return append(b, s.Redraw...)
}

// AppendDaemonInput encodes an input frame for the daemon socket.
func AppendDaemonInput(b []byte, in Input) []byte {
	b = append(b, FrameInput)
	b = binary.BigEndian.AppendUint32(b, in.Session)
	return append(b, in.Data...)
}

// DaemonFrame is one decoded binary frame of the daemon socket; exactly one
// field is set. Data fields alias the frame.
type DaemonFrame struct {
	Output   *Output
	Snapshot *Snapshot
	Input    *Input
}

// DecodeDaemon decodes a binary frame of the daemon socket (either way).
func DecodeDaemon(p []byte) (DaemonFrame, error) {
	if len(p) == 0 {
		return DaemonFrame{}, fmt.Errorf("%w: empty", ErrFrame)
	}
	switch p[0] {
	case FrameOutput:
		if len(p) < daemonOutputHeader {
			return DaemonFrame{}, fmt.Errorf("%w: output header", ErrFrame)
		}
		off, err := offset(p[5:13])
		if err != nil {
			return DaemonFrame{}, err
		}
		return DaemonFrame{Output: &Output{Session: be32(p[1:]), Offset: off, Data: p[13:]}}, nil
	case FrameSnapshot:
		return decodeDaemonSnapshot(p)
	case FrameInput:
		if len(p) < daemonInputHeader {
			return DaemonFrame{}, fmt.Errorf("%w: input header", ErrFrame)
		}
		return DaemonFrame{Input: &Input{Session: be32(p[1:]), Data: p[5:]}}, nil
	}
	return DaemonFrame{}, fmt.Errorf("%w: unknown type 0x%02x", ErrFrame, p[0])
}

func decodeDaemonSnapshot(p []byte) (DaemonFrame, error) {
	if len(p) < daemonSnapshotHeader {
		return DaemonFrame{}, fmt.Errorf("%w: snapshot header", ErrFrame)
	}
	off, err := offset(p[5:13])
	if err != nil {
		return DaemonFrame{}, err
	}
	s := &Snapshot{Session: be32(p[1:]), Offset: off, Cols: int(be16(p[13:])), Rows: int(be16(p[15:]))}
	if err := checkSize(s.Cols, s.Rows); err != nil {
		return DaemonFrame{}, err
	}
	if p[17] > 1 {
		return DaemonFrame{}, fmt.Errorf("%w: snapshot flags 0x%02x", ErrFrame, p[17])
	}
	s.Resync = p[17] == 1
	rest := p[daemonSnapshotHeader:]
	n := be32(p[18:])
	if uint64(n) > uint64(len(rest)) {
		return DaemonFrame{}, fmt.Errorf("%w: history of %d bytes in %d", ErrFrame, n, len(rest))
	}
	s.History, s.Redraw = rest[:n], rest[n:]
	return DaemonFrame{Snapshot: s}, nil
}

// AppendViewerOutput encodes an output frame for a viewer.
func AppendViewerOutput(b []byte, offset int64, data []byte) []byte {
	b = append(b, FrameOutput)
	b = binary.BigEndian.AppendUint64(b, uint64(offset))
	return append(b, data...)
}

// AppendViewerSnapshot encodes a snapshot frame for a viewer: data is what
// it writes after resizing to cols×rows.
func AppendViewerSnapshot(b []byte, offset int64, cols, rows int, data []byte) []byte {
	b = append(b, FrameSnapshot)
	b = binary.BigEndian.AppendUint64(b, uint64(offset))
	b = binary.BigEndian.AppendUint16(b, uint16(cols))
	b = binary.BigEndian.AppendUint16(b, uint16(rows))
	return append(b, data...)
}

// AppendViewerInput encodes a viewer's input frame.
func AppendViewerInput(b []byte, data []byte) []byte {
	return append(append(b, FrameInput), data...)
}

// ViewerFrame is one decoded binary frame of a viewer socket; exactly one
// field is set. For a snapshot, Redraw holds the bytes to write.
type ViewerFrame struct {
	Output   *Output
	Snapshot *Snapshot
	Input    []byte
}

// DecodeViewer decodes a binary frame of a viewer socket (either way).
func DecodeViewer(p []byte) (ViewerFrame, error) {
	if len(p) == 0 {
		return ViewerFrame{}, fmt.Errorf("%w: empty", ErrFrame)
	}
	switch p[0] {
	case FrameInput:
		return ViewerFrame{Input: p[1:]}, nil
	case FrameOutput:
		if len(p) < viewerOutputHeader {
			return ViewerFrame{}, fmt.Errorf("%w: output header", ErrFrame)
		}
		off, err := offset(p[1:9])
		if err != nil {
			return ViewerFrame{}, err
		}
		return ViewerFrame{Output: &Output{Offset: off, Data: p[9:]}}, nil
	case FrameSnapshot:
		if len(p) < viewerSnapshotHeader {
			return ViewerFrame{}, fmt.Errorf("%w: snapshot header", ErrFrame)
		}
		off, err := offset(p[1:9])
		if err != nil {
			return ViewerFrame{}, err
		}
		s := &Snapshot{Offset: off, Cols: int(be16(p[9:])), Rows: int(be16(p[11:])), Redraw: p[13:]}
		if err := checkSize(s.Cols, s.Rows); err != nil {
			return ViewerFrame{}, err
		}
		return ViewerFrame{Snapshot: s}, nil
	}
	return ViewerFrame{}, fmt.Errorf("%w: unknown type 0x%02x", ErrFrame, p[0])
}

// MaxInput is the most bytes one input frame carries, on both sockets: the
// largest paste (or any keystrokes) a viewer may send at once, which reaches
// the program whole. Every hop is sized from it: the server reads a viewer's
// input frame of MaxInput and forwards it in a daemon input frame
// (MaxToDaemon, the daemon's read limit), and the daemon holds at least
// MaxInput for a program that has not read it yet. A larger input frame is
// refused by the server with a TypeRefused message to its viewer, and the
// web page refuses a larger paste itself and says so; neither closes a
// socket.
const MaxInput = 1 << 20

// MaxToDaemon is the largest message the server sends a daemon: an input
// frame of MaxInput (control messages are far smaller).
const MaxToDaemon = daemonInputHeader + MaxInput

// MaxFromViewer is the read limit for a viewer's socket, on the server
// instance that holds the session's daemon and on one that forwards the
// viewer to it alike: an input frame of up to twice MaxInput is read and
// refused with a message (the socket stays open); only a larger one closes
// the viewer's socket (1009), never the daemon's link.
const MaxFromViewer = 2 * (1 + MaxInput)

// MaxFromDaemon is the read limit for a daemon's link (and for one server
// instance forwarding a session to another): the largest message a daemon
// may send. A larger one closes the link, and with it every session of
// the machine, so a daemon never sends one (MaxSnapshot).
const MaxFromDaemon = 32 << 20

// MaxSnapshot bounds a snapshot's history and redraw together. The program
// decides how large they are (a hyperlink target or a title is up to
// 10 million characters, and every cell of the screen and the scrollback
// can hold another link), so a daemon whose snapshot is larger sends it
// without its history, and a screen still larger as a notice that it is
// not shown (docs/PROTOCOL-terminals.md). MaxFromDaemon less 64 KiB: every
// frame that carries a snapshot (the daemon's, and a forwarded viewer's,
// which adds the attach's scrolling, at most MaxRows CRLFs) fits, and every
// snapshot that fitted the link before the bound still goes whole.
const MaxSnapshot = MaxFromDaemon - 64<<10

// MaxCols and MaxRows bound a terminal's size on the wire.
const (
	MaxCols = 1000
	MaxRows = 500
)

// checkSize refuses sizes no terminal has.
func checkSize(cols, rows int) error {
	if cols < 1 || rows < 1 || cols > MaxCols || rows > MaxRows {
		return fmt.Errorf("%w: size %dx%d outside 1x1..%dx%d", ErrFrame, cols, rows, MaxCols, MaxRows)
	}
	return nil
}

func offset(p []byte) (int64, error) {
	v := binary.BigEndian.Uint64(p)
	if v > 1<<62 {
		return 0, fmt.Errorf("%w: offset %d", ErrFrame, v)
	}
	return int64(v), nil
}

func be32(p []byte) uint32 { return binary.BigEndian.Uint32(p) }
func be16(p []byte) uint16 { return binary.BigEndian.Uint16(p) }
