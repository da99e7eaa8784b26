package cluster

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Message is one signal as a subscriber receives it.
type Message struct {
	From  string // id of the instance that published it
	Topic string
	Data  []byte
	// Sent is when the publisher queued it (its clock), for the lag metric.
	Sent time.Time
}

// Bus carries small signals to every instance, the publisher included (it
// tells its own messages by From). Messages of one publisher arrive in the
// order published. While Healthy is false, messages may have been missed:
// callers treat what they cached as stale, and OnResync tells them when the
// bus is back, so they can read the database again.
type Bus interface {
	// Publish queues a message for every instance; it does not wait for
	// delivery.
	Publish(ctx context.Context, topic string, data []byte) error
	// Subscribe calls fn for every message of topic, from one goroutine per
	// bus (fn must not block for long). Subscribe before Start.
	Subscribe(topic string, fn func(Message))
	// OnResync registers fn, called each time the bus (re)connects after it
	// may have missed messages. Register before Start.
	OnResync(fn func())
	// Healthy reports whether every message published since the last resync
	// has reached or will reach this instance.
	Healthy() bool
	Start(ctx context.Context) error
	Close()
}

// handlers is the subscriber table both buses share; static after Start.
type handlers struct {
	byTopic map[string][]func(Message)
	resync  []func()
}

func (h *handlers) subscribe(topic string, fn func(Message)) {
	if h.byTopic == nil {
		h.byTopic = map[string][]func(Message){}
	}
	h.byTopic[topic] = append(h.byTopic[topic], fn)
}

func (h *handlers) dispatch(m Message) {
	for _, fn := range h.byTopic[m.Topic] {
		fn(m)
	}
}

func (h *handlers) resynced() {
	for _, fn := range h.resync {
		fn()
	}
}

// Memory is the in-process bus for a single instance (SQLite): every
// message reaches this process's subscribers, in order, from one goroutine.
// It is always healthy.
type Memory struct {
	self string // static
	h    handlers
	q    chan Message
	done chan struct{}
	wg   sync.WaitGroup
	once sync.Once
	up   atomic.Bool
}

// NewMemory returns an in-process bus for instance self.
func NewMemory(self string) *Memory {
	return &Memory{self: self, q: make(chan Message, 4096), done: make(chan struct{})}
}

// Subscribe implements Bus.
func (m *Memory) Subscribe(topic string, fn func(Message)) { m.h.subscribe(topic, fn) }

// OnResync implements Bus; an in-process bus never misses a message.
func (m *Memory) OnResync(fn func()) { m.h.resync = append(m.h.resync, fn) }

// Healthy implements Bus.
func (m *Memory) Healthy() bool { return true }

// Start implements Bus.
func (m *Memory) Start(ctx context.Context) error {
	m.up.Store(true)
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		for {
			select {
			case <-m.done:
				return
			case msg := <-m.q:
				m.h.dispatch(msg)
			}
		}
	}()
	return nil
}

// Publish implements Bus. A full queue waits for room until ctx ends.
func (m *Memory) Publish(ctx context.Context, topic string, data []byte) error {
	msg := Message{From: m.self, Topic: topic, Data: append([]byte(nil), data...), Sent: time.Now()}
	select {
	case m.q <- msg:
		return nil
	case <-m.done:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close implements Bus; messages still queued are dropped.
func (m *Memory) Close() {
	m.once.Do(func() { close(m.done) })
	m.wg.Wait()
}
