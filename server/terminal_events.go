package server

import (
	"github.com/gofiber/fiber/v2"

	"github.com/tabbridge/tabbridge/cluster"
	"github.com/tabbridge/tabbridge/relay"
)

// relayOptions are the relay's options with its event hook wired to the
// person's event stream, so the machines page follows daemons and sessions
// live. A hook set in Options (tests) still hears every event.
func (s *Server) relayOptions() relay.Options {
	o := s.opts.Relay
	also := o.OnEvent
	o.OnEvent = func(e relay.Event) {
		s.relayEvent(e)
		if also != nil {
			also(e)
		}
	}
	return o
}

// relayEvent publishes a relay event as the server-sent event of the same
// name: machine events carry {"machine":{"id","online"}}, session events
// {"session": the session as GET /api/machines/:id/sessions lists it}.
func (s *Server) relayEvent(e relay.Event) {
	if e.Session != nil {
		s.publish(e.UserID, e.Type, fiber.Map{"session": e.Session})
		return
	}
	switch e.Type {
	case relay.EventMachineOnline:
		s.metrics.daemons.Inc()
		s.link(cluster.LinkMachine, e.MachineID, e.UserID, true)
	case relay.EventMachineOffline:
		s.metrics.daemons.Dec()
		s.link(cluster.LinkMachine, e.MachineID, e.UserID, false)
	}
	s.publish(e.UserID, e.Type, fiber.Map{"machine": fiber.Map{"id": e.MachineID, "online": e.Type == relay.EventMachineOnline}})
}
