package bridge

// onOwnStack runs fn on a short-lived goroutine and waits for it. A socket's
// reader lives as long as the socket; the stack it grows is kept (Go shrinks
// a stack only by half per collection, and only when little of it is in
// use), so work that needs a deep stack once — the hello's database calls —
// runs here instead, and the reader's stack stays as small as reading
// frames needs. A panic in fn is raised again on the caller, whose own
// recovery handles it as before.
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
