package wire

// Frame is one message queued for a socket's writer, with its kind: the
// writer sends a control message as a text frame and terminal bytes as a
// binary one, and never guesses which from the bytes.
type Frame struct {
	Text bool // a JSON control message; else a binary frame
	Data []byte
}

// Binary is a binary frame of p (output, a snapshot, input).
func Binary(p []byte) Frame { return Frame{Data: p} }

// Frame is the control message encoded as a text frame.
func (c Control) Frame() Frame { return Frame{Text: true, Data: c.Encode()} }
