package relay

// The changes a hub reports through Options.OnEvent, named as the web app's
// server-sent events are (docs/PROTOCOL.md).
const (
	EventMachineOnline  = "machine.online"
	EventMachineOffline = "machine.offline"
	EventSessionStarted = "session.started"
	EventSessionExited  = "session.exited"
	EventSessionGone    = "session.gone"
	EventSessionViewers = "session.viewers"
)

// Event is a change a person's open pages may want to show: a machine's
// daemon connected or went away, or one of its sessions started, exited or
// was removed, or a viewer attached to or left one of its sessions.
type Event struct {
	Type      string
	UserID    string // whose machine it is
	MachineID string
	Session   *SessionView // session events only
}

// emit reports an event. Callers hold no lock: the hook may publish onto
// other connections.
func (h *Hub) emit(typ string, m Machine, s *session) {
	if h.opts.OnEvent == nil {
		return
	}
	e := Event{Type: typ, UserID: m.UserID, MachineID: m.ID}
	if s != nil {
		v := s.view()
		e.Session = &v
	}
	h.opts.OnEvent(e)
}

// emitGone reports sessions that were forgotten.
func (h *Hub) emitGone(ss []*session) {
	for _, s := range ss {
		h.emit(EventSessionGone, Machine{ID: s.machineID, UserID: s.userID}, s)
	}
}
