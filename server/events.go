package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"

	"github.com/tabbridge/tabbridge/live"
)

// The events the web app's pages listen for (docs/PROTOCOL.md, "Server-sent
// events (web app)"). Data is always an object naming what changed.
const (
	evWorkspaceCreated = "workspace.created"
	evWorkspaceUpdated = "workspace.updated"
	evWorkspaceDeleted = "workspace.deleted"
	evTokenCreated     = "token.created"
	evTokenRevoked     = "token.revoked"
	evTaskCreated      = "task.created"
	evTaskUpdated      = "task.updated"
	// evCallFinished carries the call's audit entry, published by the call
	// path once the entry is appended.
	evCallFinished = "call.finished"
	evGrantRevoked = "grant.revoked"
	// Machines; their online/offline and session events come from the relay
	// (terminal_events.go).
	evMachineCreated = "machine.created"
	evMachineUpdated = "machine.updated"
	evMachineRevoked = "machine.revoked"
	// evMissed opens a stream whose page was rendered before an event the
	// page did not hear (getEvents): every page refreshes on it.
	evMissed = "missed"
)

// eventHeartbeat is how often an idle stream sends a comment: proxies keep it
// open, and a client that went away is noticed by the failed write.
var eventHeartbeat = 15 * time.Second

// eventRetry is the reconnect delay the stream asks browsers to use.
const eventRetry = 2 * time.Second

// publish tells userID's open pages that something changed.
// On several instances it goes to the others too, whose pages are told
// the same.
func (s *Server) publish(userID, typ string, data any) {
	s.live.Publish(userID, live.Event{Type: typ, Data: data})
	if !s.multi() || s.alone() { // nobody to tell: no encoding, no NOTIFY
		return
	}
	d, err := json.Marshal(data)
	if err != nil {
		s.opts.Logger.Error("encode event", "type", typ, "err", err)
		return
	}
	sig, _ := json.Marshal(liveSignal{User: userID, Type: typ, Data: d})
	s.signal(topicLive, sig)
}

// getEvents streams the person's events as server-sent events until the
// client goes away, the person falls too far behind (the page reconnects and
// re-fetches), the sign-in ends, or the server shuts down.
//
// A stream opened with ?since=<mark> (the page's data-live-mark) first
// sends a "missed" event when the person was published anything after the
// page was rendered from the database: the page refreshes once instead of
// showing what was true before (an approval asked while the inbox loaded).
func (s *Server) getEvents(c *fiber.Ctx) error {
	uid := userID(c)
	events, unsubscribe := s.live.Subscribe(uid) // before Missed: nothing falls between the two
	missed := false
	if since := c.Query("since"); since != "" {
		missed = s.live.Missed(uid, since)
	}
	ctx, stop := s.signins.follow(s.ctx, familyID(c))
	c.Set(fiber.HeaderContentType, "text/event-stream")
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		defer unsubscribe()
		defer stop()
		s.streamEvents(ctx, w, events, missed)
	})
	return nil
}

// streamEvents writes events to w, with a heartbeat, and returns on the first
// failed write: under fasthttp that is the only sign of a client disconnect.
func (s *Server) streamEvents(ctx context.Context, w *bufio.Writer, events <-chan live.Event, missed bool) {
	if !flushed(w, fmt.Sprintf("retry: %d\n: connected\n\n", eventRetry.Milliseconds())) {
		return
	}
	if missed && !flushed(w, "event: "+evMissed+"\ndata: {}\n\n") {
		return
	}
	beat := time.NewTicker(eventHeartbeat)
	defer beat.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-beat.C:
			if !flushed(w, ": heartbeat\n\n") {
				return
			}
		case e, ok := <-events:
			if !ok {
				return // dropped as too slow: the page reconnects and re-fetches
			}
			frame, err := eventFrame(e)
			if err != nil {
				s.opts.Logger.Error("encode event", "type", e.Type, "err", err)
				continue
			}
			if !flushed(w, frame) {
				return
			}
		}
	}
}

// eventFrame writes one server-sent event. The stream is UTF-8 text that a page parses line by
// line, so the frame is always valid UTF-8 (encoding/json writes U+FFFD for bad bytes in Go
// strings but copies a json.RawMessage as it is; what is left is replaced) and the type, which
// is the server's own, must be one line, else the event would be split into others.
func eventFrame(e live.Event) (string, error) {
	if e.Type == "" || strings.ContainsAny(e.Type, "\r\n") || !utf8.ValidString(e.Type) {
		return "", fmt.Errorf("event type %q is not one line of text", e.Type)
	}
	data, err := json.Marshal(e.Data)
	if err != nil {
		return "", err
	}
	if !utf8.Valid(data) {
		data = bytes.ToValidUTF8(data, []byte("\uFFFD"))
	}
	return "event: " + e.Type + "\ndata: " + string(data) + "\n\n", nil
}

func flushed(w *bufio.Writer, frame string) bool {
	if _, err := w.WriteString(frame); err != nil {
		return false
	}
	return w.Flush() == nil
}
