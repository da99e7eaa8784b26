package server

import "github.com/tabbridge/tabbridge/sitetools"

// KillInternal cuts this instance's internal listener and every connection
// on it at once, as the process dying would (the tests cannot kill their
// own process).
func (s *Server) KillInternal() {
	if s.in.srv != nil {
		s.in.srv.Close()
	}
}

// Catalog is the server's catalog of live documents.
func (s *Server) Catalog() *sitetools.Catalog { return s.catalog }
