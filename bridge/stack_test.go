package bridge

import "testing"

// TestOnOwnStackWaitsAndRaisesPanics: what fn does is done when onOwnStack
// returns, and a panic in fn reaches the caller (the socket's recovery).
func TestOnOwnStackWaitsAndRaisesPanics(t *testing.T) {
	done := false
	onOwnStack(func() { done = true })
	if !done {
		t.Fatal("returned before fn finished")
	}
	defer func() {
		if r := recover(); r != "boom" {
			t.Fatalf("recovered %v, want boom", r)
		}
	}()
	onOwnStack(func() { panic("boom") })
	t.Fatal("the panic did not reach the caller")
}
