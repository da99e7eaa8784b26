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

// TestAnswersCall: a call's answers are recognised; other frames are not.
func TestAnswersCall(t *testing.T) {
	for frame, want := range map[string]bool{
		`{"type":"call.result","callId":"c1","ok":true,"result":1}`: true,
		`{"type":"call.dispatched","callId":"c1","documentId":"d"}`: true,
		`{"type":"ping","id":"p1"}`:                                 false,
		`{"type":"hello","protocol":1,"browserId":"b"}`:             false,
	} {
		if got := answersCall([]byte(frame)); got != want {
			t.Errorf("%s: %v, want %v", frame, got, want)
		}
	}
}
