package cluster

// The internal transport: direct, authenticated connections from one
// instance to another, for what does not fit a notification (a forwarded
// tool call and its result, an MCP request of a session another instance
// holds, a terminal stream).
//
// Each instance serves an internal HTTP listener (server/internal.go) at the
// address it records in the registry (--internal-address). Every request to
// it carries "Authorization: Bearer <secret>", where the secret is derived
// (HKDF-SHA256) from the signing key every instance of a deployment already
// shares; the listener compares it in constant time and answers 401 without
// it. No new secret to distribute, and a key rotation rotates it too.
//
// The API other code uses (the terminal forwarding among it):
//
//	p := cluster.NewPeers(cluster.PeerOptions{DB: db, Self: id, Secret: cluster.InternalSecret(key)})
//	ctx = cluster.WithRequestID(ctx, requestID)    // carried as X-Request-Id
//	resp, err := p.Do(ctx, instanceID, req)         // any request; path e.g. /internal/v1/…
//	err = p.PostJSON(ctx, instanceID, path, in, &out) // JSON in, JSON out, errors decoded
//	conn, resp, err := p.DialWebSocket(ctx, instanceID, path, header)
//	addr, ok, err := p.Address(ctx, instanceID)     // the living instance's internal address
//
// On the serving side, server.Server.HandleInternal(pattern, handler)
// registers a route on the internal listener behind the same check
// (patterns as net/http.ServeMux takes them, under /internal/).
//
// Requests have deadlines: Do uses ctx's, and PeerOptions.Timeout when ctx
// has none. A peer that is not in the registry, or whose heartbeat is older
// than DeadAfter, is refused with ErrPeerGone before anything is sent, as
// is one that refuses the connection (both also wrap ErrNotSent); a peer
// that dies mid-request fails the request at once (the TCP connection
// resets or closes) with an error that wraps ErrPeerGone only.

import (
	"bytes"
	"context"
	"crypto/hkdf"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/tabbridge/tabbridge/store"
)

// ErrPeerGone means the instance asked for is not alive in the registry, or
// it went away while it was being asked.
var ErrPeerGone = errors.New("cluster: the other instance is gone")

// ErrNotSent marks an ErrPeerGone where nothing reached the other instance
// (it was not alive in the registry, or refused the connection): the caller
// may send elsewhere.
var ErrNotSent = errors.New("cluster: nothing was sent")

// HeaderRequestID carries a request's id across instances, so the logs of a
// forwarded call on both follow one id.
const HeaderRequestID = "X-Request-Id"

// InternalPrefix starts every route of the internal listener.
const InternalPrefix = "/internal/"

// InternalSecret derives the internal transport's bearer secret from the
// signing key all instances share.
func InternalSecret(key []byte) string {
	k, err := hkdf.Key(sha256.New, key, nil, "tabbridge internal transport v1", 32)
	if err != nil {
		panic(err) // only for a length sha256 cannot give
	}
	return "tbi_" + hex.EncodeToString(k)
}

// CheckInternal reports whether an Authorization header carries secret,
// comparing in constant time.
func CheckInternal(authorization, secret string) bool {
	tok, ok := strings.CutPrefix(authorization, "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(tok), []byte(secret)) == 1
}

type requestIDKey struct{}

// WithRequestID returns ctx carrying the request id requests to peers send.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestID is the id WithRequestID put in ctx, or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// PeerOptions configures Peers.
type PeerOptions struct {
	DB     *store.DB
	Self   string // this instance's id
	Secret string // InternalSecret of the shared key
	// DeadAfter is the registry's: an older heartbeat is a dead peer
	// (DefaultDeadAfter when 0).
	DeadAfter time.Duration
	// Timeout bounds a request whose ctx has no deadline (default 30 s).
	Timeout time.Duration
	// CacheFor is how long a peer's address is remembered (default 2 s);
	// a failed connection forgets it at once.
	CacheFor time.Duration
	// Now is the clock (store.Now when nil).
	Now func() time.Time
}

// Peers reaches the other instances' internal listeners.
type Peers struct {
	opts   PeerOptions  // static
	client *http.Client // static; keeps connections to each peer alive
	dialer *websocket.Dialer

	mu    sync.Mutex
	addrs map[string]cachedAddr // guarded by mu
}

type cachedAddr struct {
	addr string
	at   time.Time
}

// NewPeers returns a client of the other instances.
func NewPeers(o PeerOptions) *Peers {
	if o.DeadAfter == 0 {
		o.DeadAfter = DefaultDeadAfter
	}
	if o.Timeout == 0 {
		o.Timeout = 30 * time.Second
	}
	if o.CacheFor == 0 {
		o.CacheFor = 2 * time.Second
	}
	if o.Now == nil {
		o.Now = store.Now
	}
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 15 * time.Second}).DialContext,
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		// Calls are small JSON: compression would cost more than it saves.
		DisableCompression: true,
	}
	return &Peers{opts: o, client: &http.Client{Transport: tr}, addrs: map[string]cachedAddr{},
		dialer: &websocket.Dialer{NetDialContext: tr.DialContext, HandshakeTimeout: 10 * time.Second}}
}

// Self is this instance's id.
func (p *Peers) Self() string { return p.opts.Self }

// Address returns a living instance's internal address; ok is false when it
// is not registered, stopped, stale, or records no address.
func (p *Peers) Address(ctx context.Context, id string) (string, bool, error) {
	p.mu.Lock()
	c, hit := p.addrs[id]
	p.mu.Unlock()
	if hit && time.Since(c.at) < p.opts.CacheFor {
		return c.addr, c.addr != "", nil
	}
	var in Instance
	err := p.opts.DB.WithContext(ctx).Where("id = ?", id).Limit(1).Find(&in).Error
	if err != nil {
		return "", false, fmt.Errorf("read instance registry: %w", err)
	}
	addr := in.Address
	if in.ID == "" || in.StoppedAt != nil || in.HeartbeatAt.Before(p.opts.Now().Add(-p.opts.DeadAfter)) {
		addr = ""
	}
	p.mu.Lock()
	p.addrs[id] = cachedAddr{addr: addr, at: time.Now()}
	p.mu.Unlock()
	return addr, addr != "", nil
}

// Forget drops a peer's cached address (it failed, or it is known dead).
func (p *Peers) Forget(id string) {
	p.mu.Lock()
	delete(p.addrs, id)
	p.mu.Unlock()
}

// baseURL resolves a living peer, or fails with ErrPeerGone.
func (p *Peers) baseURL(ctx context.Context, id string) (string, error) {
	addr, ok, err := p.Address(ctx, id)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fmt.Errorf("instance %s: %w (%w)", id, ErrPeerGone, ErrNotSent)
	}
	return "http://" + addr, nil
}

// NewRequest builds a request to path on instance id; Do sends it.
func (p *Peers) NewRequest(ctx context.Context, method, path string, body io.Reader) (*http.Request, error) {
	if !strings.HasPrefix(path, InternalPrefix) {
		return nil, fmt.Errorf("internal path %q must start with %s", path, InternalPrefix)
	}
	return http.NewRequestWithContext(ctx, method, "http://peer"+path, body)
}

// Do sends req (built by NewRequest, or any request whose URL path is an
// internal route) to instance id, with the secret, the request id of its
// context and a deadline. The caller closes the response body. A peer that
// cannot be reached fails with an error wrapping ErrPeerGone.
func (p *Peers) Do(ctx context.Context, id string, req *http.Request) (*http.Response, error) {
	base, err := p.baseURL(ctx, id)
	if err != nil {
		return nil, err
	}
	cancel := func() {}
	if _, has := ctx.Deadline(); !has {
		ctx, cancel = context.WithTimeout(ctx, p.opts.Timeout)
	}
	u := *req.URL
	target, err := req.URL.Parse(base + u.RequestURI())
	if err != nil {
		cancel()
		return nil, err
	}
	out := req.Clone(ctx)
	out.URL, out.Host = target, target.Host
	out.Header.Set("Authorization", "Bearer "+p.opts.Secret)
	if rid := RequestID(ctx); rid != "" {
		out.Header.Set(HeaderRequestID, rid)
	}
	resp, err := p.client.Do(out)
	if err != nil {
		ended := ctx.Err() != nil // before cancel, which would end it
		cancel()
		if !ended {
			p.Forget(id)
			var op *net.OpError
			if errors.As(err, &op) && op.Op == "dial" {
				return nil, fmt.Errorf("instance %s: %w (%w: %v)", id, ErrPeerGone, ErrNotSent, err)
			}
			return nil, fmt.Errorf("instance %s: %w (%v)", id, ErrPeerGone, err)
		}
		return nil, err
	}
	resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel, peer: id, p: p, ctx: ctx}
	return resp, nil
}

// cancelBody ends Do's own deadline with the body, and turns a body cut
// short by the peer's death into ErrPeerGone.
type cancelBody struct {
	io.ReadCloser
	cancel func()
	peer   string
	p      *Peers
	ctx    context.Context
}

func (b *cancelBody) Read(buf []byte) (int, error) {
	n, err := b.ReadCloser.Read(buf)
	if err != nil && err != io.EOF && b.ctx.Err() == nil {
		b.p.Forget(b.peer)
		return n, fmt.Errorf("instance %s: %w (%v)", b.peer, ErrPeerGone, err)
	}
	return n, err
}

func (b *cancelBody) Close() error { err := b.ReadCloser.Close(); b.cancel(); return err }

// PeerError is a refusal an internal route answered, in the server's one
// error shape.
type PeerError struct {
	Status        int
	Code, Message string
}

func (e *PeerError) Error() string {
	return fmt.Sprintf("peer answered %d %s: %s", e.Status, e.Code, e.Message)
}

// MaxResponse bounds what PostJSON reads of an answer: a result at the
// 256 KiB cap, JSON-escaped at worst six bytes a byte, with room.
const MaxResponse = 8 << 20

// PostJSON posts in as JSON to path on instance id and decodes a 2xx answer
// into out (when not nil); any other status is a *PeerError.
func (p *Peers) PostJSON(ctx context.Context, id, path string, in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("encode request to %s: %w", path, err)
	}
	req, err := p.NewRequest(ctx, http.MethodPost, path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.Do(ctx, id, req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponse))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		_ = json.Unmarshal(body, &e)
		return &PeerError{Status: resp.StatusCode, Code: e.Error.Code, Message: e.Error.Message}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("decode answer of %s: %w", path, err)
	}
	return nil
}

// DialWebSocket opens a WebSocket to path on instance id, with the secret
// and the request id of ctx (ctx bounds the handshake only). header adds
// headers of the caller's own.
func (p *Peers) DialWebSocket(ctx context.Context, id, path string, header http.Header) (*websocket.Conn, *http.Response, error) {
	if !strings.HasPrefix(path, InternalPrefix) {
		return nil, nil, fmt.Errorf("internal path %q must start with %s", path, InternalPrefix)
	}
	base, err := p.baseURL(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	h := http.Header{}
	for k, v := range header {
		h[k] = v
	}
	h.Set("Authorization", "Bearer "+p.opts.Secret)
	if rid := RequestID(ctx); rid != "" {
		h.Set(HeaderRequestID, rid)
	}
	conn, resp, err := p.dialer.DialContext(ctx, "ws"+strings.TrimPrefix(base, "http")+path, h)
	if err != nil && resp == nil && ctx.Err() == nil {
		p.Forget(id)
		return nil, nil, fmt.Errorf("instance %s: %w (%v)", id, ErrPeerGone, err)
	}
	return conn, resp, err
}

// Close drops idle connections to the peers.
func (p *Peers) Close() { p.client.CloseIdleConnections() }
