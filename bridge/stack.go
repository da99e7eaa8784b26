package bridge

import "bytes"

// A socket's reader lives as long as the socket, and keeps the stack it
// grows: Go shrinks a stack only by half per collection, and only when little
// of it is in use, which a reader blocked deep in a read never is. Decoding
// a frame (encoding/json) and saying hello (the database) grow it from 4 to
// 8 KiB, so an idle browser's reader would keep 8 KiB for a hello and a ping
// every 20 s. Those frames are handled on a short-lived goroutine instead.
// The answers of a call (call.dispatched, call.result) stay on the reader:
// handing a frame to another goroutine and back costs two wake-ups, and a
// browser that runs calls is not idle.

// handleFrame handles one frame: on the reader when it answers a call,
// else on a goroutine of its own. Which way only changes where it runs.
func (c *conn) handleFrame(frame []byte) {
	if answersCall(frame) {
		c.handle(frame)
		return
	}
	onOwnStack(func() { c.handle(frame) })
}

// answersCall reports whether frame looks like a call's answer. A guess from
// the bytes, never trusted for more than where the frame is handled.
func answersCall(frame []byte) bool {
	return bytes.Contains(frame, []byte(`"`+TypeCallResult+`"`)) || bytes.Contains(frame, []byte(`"`+TypeCallDispatched+`"`))
}

// onOwnStack runs fn on a short-lived goroutine and waits for it, so the
// stack fn grows goes when fn returns. A panic in fn is raised again on the
// caller, whose own recovery handles it as before.
func onOwnStack(fn func()) {
	done := make(chan struct{})
	var panicked any
	go func() {
		defer func() {
			panicked = recover()
			close(done)
		}()
		fn()
	}()
	<-done
	if panicked != nil {
		panic(panicked)
	}
}
