package cluster

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgxlisten"
)

// ErrClosed is returned by Publish once the bus is closed.
var ErrClosed = errors.New("cluster: bus closed")

// Channel is the one PostgreSQL notification channel every instance
// listens on; the topic travels inside the payload.
const Channel = "tabbridge_signals"

// maxInline is the largest payload sent in the notification itself;
// PostgreSQL refuses payloads of 8000 bytes or more. Larger data goes
// through the signal_payloads table and the notification names its row.
const maxInline = 7000

// sep separates the fields of a payload; it appears in no id or topic, and
// data after the last field may hold anything.
const sep = "\x1f"

// PostgresOptions configures a Postgres bus.
type PostgresOptions struct {
	Self string  // this instance's id
	URL  string  // the database, for the dedicated LISTEN connection
	DB   *sql.DB // the pool that sends notifications
	// Ping is how often the bus notifies itself to prove the LISTEN
	// connection delivers (default 1 s); three missed pings make it
	// unhealthy, and the next one that arrives resyncs.
	Ping time.Duration
	// ReconnectDelay is the wait before redialling a lost LISTEN
	// connection (default 500 ms).
	ReconnectDelay time.Duration
	// OnLag, if set, receives the delay of each self-ping, publish to
	// delivery: the notification lag.
	OnLag  func(time.Duration)
	Logger *slog.Logger
}

// Postgres is the bus over LISTEN/NOTIFY for several instances on one
// PostgreSQL database. It holds one dedicated connection for LISTEN and
// sends through the shared pool, batching what is queued.
type Postgres struct {
	opts PostgresOptions // static
	h    handlers        // static after Start
	q    chan Message
	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup

	// listening is true from a completed LISTEN until the connection fails;
	// lastPing is the unix nanos of the last self-ping received; stale is set
	// when a resync is owed (the bus was unhealthy).
	listening atomic.Bool
	lastPing  atomic.Int64
	stale     atomic.Bool

	// up is closed at the first self-ping received: Start returns then.
	up     chan struct{}
	upOnce sync.Once

	// closing ends the sender once it has sent what is queued; closed
	// refuses new messages.
	closing  chan struct{}
	closed   atomic.Bool
	sendDone chan struct{}
	once     sync.Once
}

// NewPostgres returns a bus; Subscribe, then Start.
func NewPostgres(o PostgresOptions) *Postgres {
	if o.Ping == 0 {
		o.Ping = time.Second
	}
	if o.ReconnectDelay == 0 {
		o.ReconnectDelay = 500 * time.Millisecond
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	p := &Postgres{opts: o, q: make(chan Message, 8192), closing: make(chan struct{}), sendDone: make(chan struct{}), up: make(chan struct{})}
	p.stale.Store(true)
	return p
}

// Subscribe implements Bus.
func (p *Postgres) Subscribe(topic string, fn func(Message)) { p.h.subscribe(topic, fn) }

// OnResync implements Bus.
func (p *Postgres) OnResync(fn func()) { p.h.resync = append(p.h.resync, fn) }

// Healthy implements Bus: LISTEN is up and the last self-ping is recent.
func (p *Postgres) Healthy() bool {
	if !p.listening.Load() {
		return false
	}
	return time.Since(time.Unix(0, p.lastPing.Load())) < 3*p.opts.Ping
}

// Start dials the LISTEN connection and starts the sender; it returns once
// its own first ping came back (or ctx ends): LISTEN is in place, so nothing
// published after Start by another instance is missed, and the bus is
// healthy.
func (p *Postgres) Start(ctx context.Context) error {
	p.ctx, p.stop = context.WithCancel(context.Background())
	l := &pgxlisten.Listener{
		Connect: func(ctx context.Context) (*pgx.Conn, error) {
			p.down()
			return pgx.Connect(ctx, p.opts.URL)
		},
		LogError: func(ctx context.Context, err error) {
			p.down()
			if ctx.Err() == nil {
				p.opts.Logger.Warn("signal bus", "err", err)
			}
		},
		ReconnectDelay: p.opts.ReconnectDelay,
	}
	l.Handle(Channel, listenHandler{p: p})
	p.wg.Add(2)
	go func() { defer p.wg.Done(); _ = l.Listen(p.ctx) }()
	go func() { defer close(p.sendDone); p.send() }()
	go func() { defer p.wg.Done(); p.pinger() }()
	select {
	case <-p.up:
		return nil
	case <-ctx.Done():
		p.Close()
		return fmt.Errorf("start signal bus: %w", ctx.Err())
	}
}

func (p *Postgres) down() {
	p.listening.Store(false)
	p.stale.Store(true)
}

// listenHandler receives the channel's notifications; its backlog call
// comes right after LISTEN, when the connection is up.
type listenHandler struct{ p *Postgres }

func (h listenHandler) HandleBacklog(ctx context.Context, _ string, _ *pgx.Conn) error {
	h.p.listening.Store(true)
	// A ping right away: health (and the resync it brings) comes back as
	// soon as the connection is proven, not a period later.
	return h.p.Publish(ctx, topicPing, nil)
}

func (h listenHandler) HandleNotification(ctx context.Context, n *pgconn.Notification, conn *pgx.Conn) error {
	m, err := h.p.decode(ctx, n.Payload, conn)
	if err != nil {
		return err
	}
	if m.Topic == topicPing {
		if m.From == h.p.opts.Self {
			h.p.pinged(m)
		}
		return nil
	}
	h.p.h.dispatch(m)
	return nil
}

const topicPing = "_ping"

// pinged records a self-ping; the first after an outage resyncs.
func (p *Postgres) pinged(m Message) {
	now := time.Now()
	if p.opts.OnLag != nil {
		p.opts.OnLag(now.Sub(m.Sent))
	}
	p.lastPing.Store(now.UnixNano())
	p.upOnce.Do(func() { close(p.up) })
	if p.listening.Load() && p.stale.CompareAndSwap(true, false) {
		p.h.resynced()
	}
}

func (p *Postgres) pinger() {
	t := time.NewTicker(p.opts.Ping)
	defer t.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-t.C:
			if !p.Healthy() {
				p.stale.Store(true)
			}
			_ = p.Publish(p.ctx, topicPing, nil)
		}
	}
}

// Publish implements Bus. A full queue waits for room until ctx ends.
func (p *Postgres) Publish(ctx context.Context, topic string, data []byte) error {
	if p.ctx == nil || p.closed.Load() {
		return ErrClosed
	}
	msg := Message{From: p.opts.Self, Topic: topic, Data: append([]byte(nil), data...), Sent: time.Now()}
	select {
	case p.q <- msg:
		return nil
	case <-p.ctx.Done():
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// send drains the queue, sending what has gathered in one statement, and
// sweeps old large payloads once a minute.
func (p *Postgres) send() {
	sweep := time.NewTicker(time.Minute)
	defer sweep.Stop()
	for {
		var batch []Message
		select {
		case <-p.closing:
			p.flush()
			return
		case <-sweep.C:
			p.sweep()
			continue
		case m := <-p.q:
			batch = append(batch, m)
		}
	more:
		for len(batch) < 64 {
			select {
			case m := <-p.q:
				batch = append(batch, m)
			default:
				break more
			}
		}
		if err := p.sendBatch(batch); err != nil && p.ctx.Err() == nil {
			p.opts.Logger.Error("send signals", "count", len(batch), "err", err)
		}
	}
}

// flush sends what is still queued when the bus closes: a shutting-down
// instance's last signals (the requests it withdrew) must reach the others.
func (p *Postgres) flush() {
	for {
		var batch []Message
	more:
		for len(batch) < 64 {
			select {
			case m := <-p.q:
				batch = append(batch, m)
			default:
				break more
			}
		}
		if len(batch) == 0 {
			return
		}
		if err := p.sendBatch(batch); err != nil {
			p.opts.Logger.Error("send signals at close", "count", len(batch), "err", err)
			return
		}
	}
}

func (p *Postgres) sendBatch(batch []Message) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var q strings.Builder
	args := make([]any, 0, 2*len(batch))
	q.WriteString("SELECT ")
	for i, m := range batch {
		payload, err := p.encode(ctx, m)
		if err != nil {
			return err
		}
		if i > 0 {
			q.WriteString(", ")
		}
		fmt.Fprintf(&q, "pg_notify($%d, $%d)", 2*i+1, 2*i+2)
		args = append(args, Channel, payload)
	}
	_, err := p.opts.DB.ExecContext(ctx, q.String(), args...)
	return err
}

// encode writes from, topic, sent, then "i" and the data, or "r" and the
// id of the signal_payloads row holding it.
func (p *Postgres) encode(ctx context.Context, m Message) (string, error) {
	head := m.From + sep + m.Topic + sep + strconv.FormatInt(m.Sent.UnixNano(), 10) + sep
	if len(head)+len(m.Data) < maxInline {
		return head + "i" + string(m.Data), nil
	}
	id := uuid.Must(uuid.NewV7()).String()
	_, err := p.opts.DB.ExecContext(ctx, "INSERT INTO signal_payloads (id, payload, created_at) VALUES ($1, $2, $3)", id, string(m.Data), time.Now().UTC())
	if err != nil {
		return "", fmt.Errorf("store large signal: %w", err)
	}
	return head + "r" + id, nil
}

func (p *Postgres) decode(ctx context.Context, payload string, conn *pgx.Conn) (Message, error) {
	m, ref, err := parsePayload(payload)
	if err != nil || ref == "" {
		return m, err
	}
	var data string
	if err := conn.QueryRow(ctx, "SELECT payload FROM signal_payloads WHERE id = $1", ref).Scan(&data); err != nil {
		return Message{}, fmt.Errorf("read large signal %s: %w", ref, err)
	}
	m.Data = []byte(data)
	return m, nil
}

// parsePayload reads a notification's payload as encode writes it: the
// message with its data, or with none and the id of the signal_payloads row
// that holds it (ref). Anything else is an error quoting what is wrong.
func parsePayload(payload string) (m Message, ref string, err error) {
	parts := strings.SplitN(payload, sep, 4)
	if len(parts) != 4 || parts[3] == "" {
		return Message{}, "", fmt.Errorf("malformed signal %.40q", payload)
	}
	nanos, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil || strconv.FormatInt(nanos, 10) != parts[2] {
		return Message{}, "", fmt.Errorf("malformed signal time %.40q", parts[2])
	}
	m = Message{From: parts[0], Topic: parts[1], Sent: time.Unix(0, nanos)}
	body := parts[3][1:]
	switch parts[3][0] {
	case 'i':
		m.Data = []byte(body)
		return m, "", nil
	case 'r':
		if u, err := uuid.Parse(body); err != nil || u.String() != body {
			return Message{}, "", fmt.Errorf("malformed signal reference %.40q", body)
		}
		return m, body, nil
	}
	return Message{}, "", fmt.Errorf("malformed signal kind %q", parts[3][0])
}

func (p *Postgres) sweep() {
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	if _, err := p.opts.DB.ExecContext(ctx, "DELETE FROM signal_payloads WHERE created_at < $1", time.Now().UTC().Add(-time.Minute)); err != nil && p.ctx.Err() == nil {
		p.opts.Logger.Warn("sweep large signals", "err", err)
	}
}

// Close sends what is queued, then stops listening and sending.
func (p *Postgres) Close() {
	p.once.Do(func() {
		p.closed.Store(true)
		if p.stop == nil {
			return
		}
		close(p.closing)
		<-p.sendDone
		p.stop()
		p.wg.Wait()
		p.listening.Store(false)
	})
}
