// Package bridgetest is a Go client for the extension socket that behaves as
// the extension's service worker does: it dials /ws/extension with a ticket
// and an Origin, says hello, pings, and reads what the server pushes. Tests
// and benchmarks use it against a real server; it owns no server state.
package bridgetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/fasthttp/websocket"

	"github.com/tabbridge/tabbridge/bridge"
)

// Origin returns the chrome-extension:// origin of an extension id.
func Origin(extensionID string) string { return "chrome-extension://" + extensionID }

// Browser is one test browser's socket. Its methods are for one goroutine at a
// time (one reader, one writer), as with a real socket.
type Browser struct {
	Conn *websocket.Conn
	// ID is the browser id sent in Hello.
	ID string
}

// Message is any message the server sends; only the fields of its type are set.
type Message struct {
	Type        string        `json:"type"`
	ID          string        `json:"id"`
	Protocol    int           `json:"protocol"`
	BrowserID   string        `json:"browserId"`
	Name        string        `json:"name"`
	SharedSites []bridge.Site `json:"sharedSites"`
	Limits      bridge.Limits `json:"limits"`
	Time        int64         `json:"time"`
	Code        string        `json:"code"`
	Message     string        `json:"message"`
	Ref         string        `json:"ref"`
	// call and call.cancel
	Site       string          `json:"site"`
	Tool       string          `json:"tool"`
	Arguments  json.RawMessage `json:"arguments"`
	DocumentID string          `json:"documentId"`
	URL        string          `json:"url"`
	Deadline   int64           `json:"deadline"`
	CallID     string          `json:"callId"`
	Reason     string          `json:"reason"`
	Gate       string          `json:"gate"`
	// tools.accepted
	Accepted []string `json:"accepted"`
	Refused  []struct {
		Tool   string `json:"tool"`
		Reason string `json:"reason"`
	} `json:"refused"`
	// approvals
	Pending int    `json:"pending"`
	Event   string `json:"event"`
	// Raw is the frame as received.
	Raw json.RawMessage `json:"-"`
}

var dialer = &websocket.Dialer{
	HandshakeTimeout: 10 * time.Second,
	ReadBufferSize:   1024,
	WriteBufferSize:  1024,
	WriteBufferPool:  &sync.Pool{},
}

// SocketURL turns a server's http(s) base URL into its extension socket URL
// with the ticket in the query.
func SocketURL(serverURL, ticket string) string {
	u := strings.Replace(strings.Replace(serverURL, "https://", "wss://", 1), "http://", "ws://", 1)
	u = strings.TrimRight(u, "/") + "/ws/extension"
	if ticket != "" {
		u += "?ticket=" + url.QueryEscape(ticket)
	}
	return u
}

// Dial opens an extension socket with a ticket, sending origin as the
// Origin header ("" sends none). On a refused upgrade the error is
// websocket.ErrBadHandshake and the response holds the server's answer.
func Dial(ctx context.Context, serverURL, ticket, origin string) (*Browser, *http.Response, error) {
	return DialWith(ctx, dialer, serverURL, ticket, origin)
}

// DialWith is Dial through d (a proxy's TLS and its address, say).
func DialWith(ctx context.Context, d *websocket.Dialer, serverURL, ticket, origin string) (*Browser, *http.Response, error) {
	h := http.Header{}
	if origin != "" {
		h.Set("Origin", origin)
	}
	conn, resp, err := d.DialContext(ctx, SocketURL(serverURL, ticket), h)
	if err != nil {
		return nil, resp, err
	}
	return &Browser{Conn: conn}, resp, nil
}

// Send writes one message as JSON.
func (b *Browser) Send(v any) error {
	b.Conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	return b.Conn.WriteJSON(v)
}

// SendRaw writes one frame as-is (websocket.TextMessage or BinaryMessage).
func (b *Browser) SendRaw(messageType int, data []byte) error {
	b.Conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	return b.Conn.WriteMessage(messageType, data)
}

// Hello introduces the browser (protocol bridge.ProtocolVersion) and waits for
// the welcome.
func (b *Browser) Hello(id, name, version string, timeout time.Duration) (*Message, error) {
	b.ID = id
	hello := map[string]any{"type": bridge.TypeHello, "id": "h1", "protocol": bridge.ProtocolVersion, "browserId": id, "name": name, "version": version}
	if err := b.Send(hello); err != nil {
		return nil, err
	}
	m, err := b.Next(timeout)
	if err != nil {
		return nil, err
	}
	if m.Type != bridge.TypeWelcome {
		return nil, fmt.Errorf("hello answered with %s", m.Raw)
	}
	return m, nil
}

// Next reads the next message. A closed socket gives *websocket.CloseError
// (see CloseCode).
func (b *Browser) Next(timeout time.Duration) (*Message, error) {
	b.Conn.SetReadDeadline(time.Now().Add(timeout))
	typ, data, err := b.Conn.ReadMessage()
	if err != nil {
		return nil, err
	}
	if typ == websocket.TextMessage && !utf8.Valid(data) {
		// What Chromium does: it fails the whole socket (1006) on such a frame.
		b.Conn.Close()
		return nil, fmt.Errorf("server sent a text frame that is not UTF-8, which makes Chromium drop the socket: %q", data)
	}
	m := &Message{Raw: data}
	if err := json.Unmarshal(data, m); err != nil {
		return nil, fmt.Errorf("server sent %q: %w", data, err)
	}
	return m, nil
}

// Expect reads until a message of type typ arrives, skipping others, and
// returns it; it fails when the socket closes or timeout passes first.
func (b *Browser) Expect(typ string, timeout time.Duration) (*Message, error) {
	deadline := time.Now().Add(timeout)
	for {
		m, err := b.Next(time.Until(deadline))
		if err != nil {
			return nil, fmt.Errorf("waiting for %s: %w", typ, err)
		}
		if m.Type == typ {
			return m, nil
		}
	}
}

// Ping sends a ping with id and waits for its pong; it returns the round trip.
func (b *Browser) Ping(id string, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	if err := b.Send(map[string]string{"type": bridge.TypePing, "id": id}); err != nil {
		return 0, err
	}
	for {
		m, err := b.Next(timeout - time.Since(start))
		if err != nil {
			return 0, err
		}
		if m.Type == bridge.TypePong && m.ID == id {
			return time.Since(start), nil
		}
	}
}

// Closed reads (dropping messages) until the server closes the socket and
// returns its close code and reason; err is set when the connection ended
// without a close frame or timeout passed.
func (b *Browser) Closed(timeout time.Duration) (code int, reason string, err error) {
	deadline := time.Now().Add(timeout)
	for {
		_, err := b.Next(time.Until(deadline))
		if err == nil {
			continue
		}
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			return ce.Code, ce.Text, nil
		}
		return 0, "", err
	}
}

// Close ends the socket with a normal close frame.
func (b *Browser) Close() error {
	b.Conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	return b.Conn.Close()
}
