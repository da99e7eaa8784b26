package server_test

import (
	"strings"
	"testing"

	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// TestAuditCursorThatIsNoIDIsRefused: "before" that is not an entry's id
// (cut off, mistyped, another list's cursor) was read as "nothing is
// before it": an empty page, which a client paging through the log takes
// for its end. It is refused, saying what "before" must be, as the task
// list's cursor is.
func TestAuditCursorThatIsNoIDIsRefused(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		env := servertest.Start(t, k, nil)
		alice, _, _ := aliceWorld(t, env)
		for _, path := range []string{"/api/audit?before=not-an-id", "/api/audit?before=0190", "/audit?before=x"} {
			status, body := alice.Do("GET", path, nil)
			if status != 400 || !strings.Contains(string(body), "before") {
				t.Errorf("GET %s = %d %s; want 400 naming \"before\"", path, status, body)
			}
		}
		alice.MustJSON("GET", "/api/audit?before=01900000-0000-7000-8000-000000000000", nil, 200, nil)
	})
}
