package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
	"github.com/tabbridge/tabbridge/tickets"
)

// TestTicketsAskedInALoopAreRefused: a sign-in that asks for tickets and
// spends none holds at most tickets.MaxUnspent; the next is 429
// too_many_tickets with a sentence that says what to do, and spending one
// (the extension socket it opens) makes room again.
func TestTicketsAskedInALoopAreRefused(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		env := servertest.Start(t, k, func(o *server.Options) { o.OpenSignup = true })
		a := env.Person(t, "a@example.com")
		a.Origin = extOrigin
		var first string
		for i := range tickets.MaxUnspent {
			tk := ticketFor(t, a)
			if i == 0 {
				first = tk
			}
		}
		status, body := a.Do("POST", "/api/tickets", nil)
		if status != http.StatusTooManyRequests || servertest.ErrorCode(body) != "too_many_tickets" ||
			!strings.Contains(string(body), "100 unspent tickets") {
			t.Fatalf("ticket %d: %d %s", tickets.MaxUnspent+1, status, body)
		}
		b := env.Person(t, "b@example.com")
		b.Origin = extOrigin
		ticketFor(t, b)                            // another person's are not counted
		extBrowserWith(t, env, first, "spent-one") // spends the first
		ticketFor(t, a)
	})
}
