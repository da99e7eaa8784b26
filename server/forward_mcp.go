package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/tabbridge/tabbridge/cluster"
)

// MCP sessions of another instance (docs/DECISIONS.md, "MCP sessions across
// instances"). A session lives in the memory of the instance that
// initialized it, and its id names that instance: "<instance>.<random>".
// Clients need not stick to an instance: a request carrying the session id
// of another living instance is proxied, streams included, to that
// instance's internal listener, which serves it with its own MCP handler;
// a session whose instance is dead is resumed on the instance the request
// reached (mcp_resume.go).

// sessionSep separates the instance from the random part of a session id;
// rand.Text never writes it.
const sessionSep = "."

// headerForwardedAuth carries the agent's own Authorization to the
// instance owning the session (Authorization carries the internal secret).
const headerForwardedAuth = "X-Tabbridge-Agent-Authorization"

// newSessionID is the SDK's session id generator: this instance's id, then
// 128 random bits.
func (s *Server) newSessionID() string { return s.id + sessionSep + rand.Text() }

// sessionInstance names the instance a session id belongs to; ok is false
// for an id this scheme did not make.
func sessionInstance(sid string) (string, bool) {
	i := strings.LastIndex(sid, sessionSep)
	if i <= 0 {
		return "", false
	}
	return sid[:i], true
}

// hopHeaders are not passed through the proxy.
var hopHeaders = map[string]bool{"Connection": true, "Keep-Alive": true, "Transfer-Encoding": true, "Upgrade": true,
	"Te": true, "Trailer": true, "Proxy-Connection": true, "Content-Length": true, "Host": true}

// forwardMCP sends a request of another instance's session there (after
// the agent guard: a bad token is refused here, as on one instance).
func (s *Server) forwardMCP(c *fiber.Ctx) error {
	sid := c.Get("Mcp-Session-Id")
	owner, ok := sessionInstance(sid)
	if !ok || owner == s.id || !s.multi() {
		return c.Next()
	}
	if _, alive, err := s.in.peers.Address(c.UserContext(), owner); err != nil {
		return err
	} else if !alive {
		// Its instance is gone: the session is resumed here (mcp_resume.go).
		return c.Next()
	}
	if c.Method() == fiber.MethodPost {
		s.mcpPosts.Add(1)
		defer s.mcpPosts.Done()
	}
	rid, _ := c.Locals(localRequestID).(string)
	ctx, cancel := context.WithTimeout(cluster.WithRequestID(context.Background(), rid), s.proxyLimit(c.Method()))
	stop := context.AfterFunc(s.ctx, cancel)
	// The client going away closes the forwarded request, which the owner
	// takes as its client going away (watchRequest).
	conn := c.Context().Conn()
	watch, watching := watchConn(conn, cancel)
	unwatch := func() {
		if watching {
			watch.stop()
		}
	}
	resp, err := s.proxyMCP(ctx, c, owner)
	if err != nil {
		unwatch()
		stop()
		cancel()
		s.logFor(c).Warn("forward an MCP request to the instance of its session", "instance", owner, "err", err)
		if errors.Is(err, cluster.ErrPeerGone) {
			// Its instance is gone: the session is resumed here (mcp_resume.go).
			return c.Next()
		}
		return errorf(http.StatusBadGateway, codeInternal, "The Tabbridge instance holding this MCP session did not answer; call again, or open a new session.")
	}
	c.Status(resp.StatusCode)
	for k, vs := range resp.Header {
		if !hopHeaders[k] {
			for _, v := range vs {
				c.Response().Header.Add(k, v)
			}
		}
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		defer unwatch()
		defer stop()
		defer cancel()
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, cluster.MaxResponse))
		if err != nil {
			return errorf(http.StatusBadGateway, codeInternal, "The Tabbridge instance holding this MCP session went away mid-answer; call again, or open a new session.")
		}
		return c.Send(body)
	}
	// A stream: each event goes on as it comes. It ends with the other
	// instance's stream, or when the client goes away (the watch, resumed
	// while the stream is written: fasthttp reads nothing meanwhile).
	unwatch()
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		if watch, ok := watchConn(conn, cancel); ok {
			defer watch.stop()
		}
		defer stop()
		defer cancel()
		defer resp.Body.Close()
		buf := make([]byte, 32<<10)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				if _, werr := w.Write(buf[:n]); werr != nil || w.Flush() != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	})
	return nil
}

// proxyLimit bounds a proxied request: a POST by the longest a call can
// take, a GET stream by the session's idle timeout (the client redials it).
func (s *Server) proxyLimit(method string) time.Duration {
	if method == fiber.MethodGet {
		return s.opts.MCPSessionTimeout + time.Minute
	}
	return s.longestCall()
}

func (s *Server) proxyMCP(ctx context.Context, c *fiber.Ctx, owner string) (*http.Response, error) {
	req, err := s.in.peers.NewRequest(ctx, c.Method(), "/internal/v1/mcp", bytes.NewReader(c.Body()))
	if err != nil {
		return nil, err
	}
	c.Request().Header.VisitAll(func(k, v []byte) {
		name := string(k)
		if !hopHeaders[http.CanonicalHeaderKey(name)] && name != fiber.HeaderAuthorization {
			req.Header.Add(name, string(v))
		}
	})
	req.Header.Set(headerForwardedAuth, c.Get(fiber.HeaderAuthorization))
	return s.in.peers.Do(ctx, owner, req)
}

// internalMCP serves a request another instance forwarded for a session of
// this one: the agent's token is checked again here, then the MCP handler
// takes it as if it had come in directly.
func (s *Server) internalMCP(w http.ResponseWriter, r *http.Request) {
	tok, ok := strings.CutPrefix(r.Header.Get(headerForwardedAuth), "Bearer ")
	if !ok || strings.TrimSpace(tok) == "" {
		writeInternalError(w, http.StatusUnauthorized, codeAgentTokenRequired, "A forwarded MCP request carries the agent's token in "+headerForwardedAuth+".")
		return
	}
	id, err := s.authenticateAgent(r.Context(), strings.TrimSpace(tok))
	if err != nil {
		writeInternalError(w, http.StatusUnauthorized, codeAgentTokenInvalid, "This agent token is unknown, revoked or expired; ask the person for a new one.")
		return
	}
	r.Header.Set("Authorization", "Bearer "+strings.TrimSpace(tok))
	r.Header.Del(headerForwardedAuth)
	ctx := context.WithValue(r.Context(), localAgent, id)
	ctx = context.WithValue(ctx, forwardedHangup{}, r.Context().Done())
	s.mcpHTTP.ServeHTTP(w, r.WithContext(ctx))
}

// forwardedHangup keys, in a forwarded MCP request's context, the channel
// closed when the instance that forwarded it closed the request: its
// client went away (forwardMCP watches the client's connection there).
type forwardedHangup struct{}

// stopper is a watch that can be stopped.
// closed reports at once whether the client is known to be gone, without
// waiting for the watch's own goroutine to notice.
type stopper interface {
	stop()
	closed() bool
}

// watchRequest watches for the client behind an MCP request going away:
// its connection, or for a forwarded request the forwarding instance's
// hang-up. false: it cannot be watched.
func watchRequest(r *http.Request, onGone func()) (stopper, bool) {
	if ch, ok := r.Context().Value(forwardedHangup{}).(<-chan struct{}); ok {
		return watchChan(ch, onGone), true
	}
	cg, ok := r.Context().(interface{ Conn() net.Conn })
	if !ok || cg.Conn() == nil {
		return nil, false
	}
	w, ok := watchConn(cg.Conn(), onGone)
	if !ok {
		return nil, false
	}
	return w, true
}

// chanWatch calls onGone once when ch closes, unless stopped first.
type chanWatch struct {
	ch   <-chan struct{}
	done chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

func watchChan(ch <-chan struct{}, onGone func()) *chanWatch {
	w := &chanWatch{ch: ch, done: make(chan struct{})}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		select {
		case <-ch:
			onGone()
		case <-w.done:
		}
	}()
	return w
}

func (w *chanWatch) closed() bool {
	select {
	case <-w.ch:
		return true
	default:
		return false
	}
}

func (w *chanWatch) stop() {
	w.once.Do(func() { close(w.done) })
	w.wg.Wait()
}
