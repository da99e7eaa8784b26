package live

import (
	"strings"
	"testing"
)

// FuzzMissed: a mark comes back from a page's address, so it is any text.
// Only the exact mark this hub gave for the person's latest event counts as
// up to date; any other text (another instance's, an old one, one spelt
// another way) counts as missed, which makes the page refresh once.
func FuzzMissed(f *testing.F) {
	h := New(4)
	h.Publish("u1", Event{Type: "site.updated"})
	now := h.Mark("u1")
	epoch, _, _ := strings.Cut(now, ".")
	for _, s := range []string{now, h.Mark("u2"), epoch + ".01", epoch + ".+1", epoch + ".", "x.1", "", epoch + ".18446744073709551616", epoch + "..1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, mark string) {
		if missed := h.Missed("u1", mark); missed != (mark != now) {
			t.Fatalf("Missed(%q) = %v; the latest mark is %q", mark, missed, now)
		}
		if !h.Missed("u2", mark) && mark != h.Mark("u2") {
			t.Fatalf("Missed(u2, %q) = false; u2's mark is %q", mark, h.Mark("u2"))
		}
	})
}
