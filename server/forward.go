package server

// forwarder routes tool calls across instances (docs/DECISIONS.md,
// "Forwarding between instances").
type forwarder struct{}

func (s *Server) forwardRoutes() {}
