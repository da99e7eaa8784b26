package bridge

// Change kinds: what Options.OnChange hears of.
const (
	// ChangeConnected: a browser said hello and is attached.
	ChangeConnected = "connected"
	// ChangeDisconnected: a browser's socket ended (not one replaced by a
	// newer socket of the same browser, which stays connected).
	ChangeDisconnected = "disconnected"
	// ChangeTools: a document announced its tools or went away; Origin
	// names its site.
	ChangeTools = "tools"
	// ChangeOpen: which shared sites a browser has open (sites.open)
	// changed — a site or a tab count, not merely when one was last used.
	ChangeOpen = "open"
)

// Change is one change a person's pages show.
type Change struct {
	Kind      string // one of the Change… kinds
	BrowserID string
	Origin    string // ChangeTools only; "" when not known
}

// changed tells Options.OnChange, if set. Callers hold no lock.
func (c *conn) changed(kind, origin string) {
	if f := c.h.opts.OnChange; f != nil {
		f(c.userID, Change{Kind: kind, BrowserID: c.browserID, Origin: origin})
	}
}
