package approvals

// WaitersJoined reports how many calls wait on an in-flight request.
func WaitersJoined(g *Gate, id string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if w := g.byID[id]; w != nil {
		return w.waiters
	}
	return 0
}
