package server

import (
	"strings"
	"testing"

	"github.com/google/uuid"
)

// FuzzPageCursors: a page's cursor ("before" of the task list and of the
// audit log) comes back in a query string, so it is any text. It is taken
// only as an id, which it then is in its one spelling; anything else is
// refused, naming the parameter.
func FuzzPageCursors(f *testing.F) {
	for _, s := range []string{"", "01900000-0000-7000-8000-000000000000", "01900000000070008000000000000000",
		"{01900000-0000-7000-8000-000000000000}", "urn:uuid:01900000-0000-7000-8000-000000000000", "not-an-id", "0190", "01900000-0000-7000-8000-00000000000G"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		for name, read := range map[string]func(string) (string, error){
			"tasks": func(v string) (string, error) { return taskCursor("before", v) },
			"audit": auditCursor,
		} {
			got, err := read(v)
			if err != nil {
				if !strings.Contains(err.Error(), `"before"`) {
					t.Fatalf("%s cursor %q: %v does not name the parameter", name, v, err)
				}
				continue
			}
			if v == "" {
				if got != "" {
					t.Fatalf("%s cursor \"\" read as %q", name, got)
				}
				continue
			}
			if u, err := uuid.Parse(got); err != nil || u.String() != got {
				t.Fatalf("%s cursor %q read as %q, not an id in its one spelling", name, v, got)
			}
			if again, err := read(got); err != nil || again != got {
				t.Fatalf("%s cursor %q: %q read again is %q, %v", name, v, got, again, err)
			}
		}
	})
}
