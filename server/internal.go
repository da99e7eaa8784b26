package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/tabbridge/tabbridge/cluster"
)

// The internal listener (cluster/peer.go describes the transport): the
// routes other instances call, on --internal-address, apart from the public
// listener. Only a request carrying the internal secret gets through.
//
// Routes of this package: internalInvoke and internalSite (forward.go),
// internalDirectory (forward_dir.go), internalMCP (forward_mcp.go). Others
// register theirs with HandleInternal.

// internal holds the internal listener; static after startInternal.
type internal struct {
	secret string
	mux    *http.ServeMux
	srv    *http.Server
	ln     net.Listener // nil when this instance has no internal address
	peers  *cluster.Peers
	done   chan struct{}
}

// internalAddresses splits the configured address into where to listen and
// what to record in the registry: a port of 0 takes the port the listener
// got; an unspecified host is refused, since no other instance could dial it.
func (s *Server) internalAddresses() (listen string, err error) {
	addr := s.opts.InternalAddress
	if addr == "" {
		return "", nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("new server: internal address %q: want host:port", addr)
	}
	if ip := net.ParseIP(host); s.opts.InternalListen == "" && (host == "" || (ip != nil && ip.IsUnspecified())) {
		return "", fmt.Errorf("new server: internal address %q names no host the other instances can dial; give this machine's address (and --internal-listen to listen on every interface)", addr)
	}
	if s.opts.InternalListen != "" {
		return s.opts.InternalListen, nil
	}
	return addr, nil
}

// listenInternal opens the internal listener (before the registry records
// its address) on several instances; on one, there is nobody to serve.
func (s *Server) listenInternal() error {
	s.in = &internal{secret: cluster.InternalSecret(s.opts.Key), mux: http.NewServeMux(), done: make(chan struct{})}
	s.in.peers = cluster.NewPeers(cluster.PeerOptions{DB: s.opts.DB, Self: s.id, Secret: s.in.secret, DeadAfter: s.opts.DeadAfter})
	if !s.multi() {
		close(s.in.done)
		return nil
	}
	listen, err := s.internalAddresses()
	if err != nil {
		return err
	}
	if listen == "" {
		close(s.in.done)
		s.opts.Logger.Warn("no internal address (--internal-address): the other instances cannot forward calls, MCP sessions or terminals to this one")
		return nil
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("new server: listen on the internal address: %w", err)
	}
	s.in.ln = ln
	if _, port, _ := net.SplitHostPort(s.opts.InternalAddress); port == "0" {
		host, _, _ := net.SplitHostPort(s.opts.InternalAddress)
		_, real, _ := net.SplitHostPort(ln.Addr().String())
		s.opts.InternalAddress = net.JoinHostPort(host, real)
	}
	return nil
}

// serveInternal serves the internal routes until Shutdown.
func (s *Server) serveInternal() {
	if s.in.ln == nil {
		return
	}
	s.in.srv = &http.Server{Handler: s.internalGuard(s.in.mux), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(s.opts.Logger.Handler(), slog.LevelWarn)}
	go func() {
		defer close(s.in.done)
		if err := s.in.srv.Serve(s.in.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.opts.Logger.Error("internal listener", "err", err)
		}
	}()
	s.opts.Logger.Info("internal listener", "addr", s.in.ln.Addr().String(), "advertised", s.opts.InternalAddress)
}

// closeInternal stops the internal listener: requests in flight may finish
// until ctx ends (forwarded calls end sooner, with the server's context).
func (s *Server) closeInternal(ctx context.Context) {
	if s.in.srv != nil {
		if err := s.in.srv.Shutdown(ctx); err != nil {
			s.in.srv.Close()
		}
	} else if s.in.ln != nil {
		s.in.ln.Close()
	}
	<-s.in.done
	s.in.peers.Close()
}

// InternalAddress is where the other instances reach this one ("" if none).
func (s *Server) InternalAddress() string {
	if s.in.ln == nil {
		return ""
	}
	return s.opts.InternalAddress
}

// HandleInternal registers h on the internal listener for pattern (as
// net/http.ServeMux takes it, e.g. "GET /internal/v1/terminal/{id}"). Every
// request reaching h carried the internal secret; its X-Request-Id is in
// r.Context() (cluster.RequestID).
func (s *Server) HandleInternal(pattern string, h http.Handler) {
	s.in.mux.Handle(pattern, h)
}

// Peers is the client of the other instances' internal listeners.
func (s *Server) Peers() *cluster.Peers { return s.in.peers }

// internalGuard admits only requests carrying the internal secret, and puts
// their request id in the context.
func (s *Server) internalGuard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, cluster.InternalPrefix) {
			writeInternalError(w, http.StatusNotFound, codeNoRoute, "Only the other Tabbridge instances call this listener, under "+cluster.InternalPrefix+".")
			return
		}
		if !cluster.CheckInternal(r.Header.Get("Authorization"), s.in.secret) {
			s.opts.Logger.Warn("internal request refused: no or wrong internal secret", "remote", r.RemoteAddr, "path", r.URL.Path)
			writeInternalError(w, http.StatusUnauthorized, codeInternalUnauthorized,
				"This is the internal listener of a Tabbridge instance: only another instance sharing its signing key may call it (Authorization: Bearer <internal secret>).")
			return
		}
		id := r.Header.Get(headerRequestID)
		if !wellFormedRequestID(id) {
			id = ""
		}
		w.Header().Set(headerRequestID, id)
		next.ServeHTTP(w, r.WithContext(cluster.WithRequestID(r.Context(), id)))
	})
}

// writeInternalError answers in the one error shape, from net/http.
func writeInternalError(w http.ResponseWriter, status int, code, message string) {
	var b errorBody
	b.Error.Code, b.Error.Message = code, message
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(b)
}

// internalLog is the logger with a forwarded request's id and this instance.
func (s *Server) internalLog(ctx context.Context) *slog.Logger {
	return s.opts.Logger.With("request_id", cluster.RequestID(ctx), "instance", s.id)
}

// internalRoutes mounts this package's internal routes.
func (s *Server) internalRoutes() {
	s.HandleInternal("GET /internal/v1/ping", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"instance": s.id, "requestId": cluster.RequestID(r.Context())})
	}))
	s.forwardRoutes()
}
