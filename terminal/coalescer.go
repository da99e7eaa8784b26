package terminal

import (
	"sync"
	"sync/atomic"
	"time"
)

// Window is how long output is coalesced while it keeps coming: about one
// frame, so a spinner redrawing 100 times a second costs about 40 batches.
const Window = 25 * time.Millisecond

// EchoWindow is how long after a viewer's input output goes out at once,
// window or not: long enough for a program to echo a key or redraw a line
// on a loaded machine, short enough that a spinner running beside the
// typing still goes out about 40 times a second between keys.
const EchoWindow = 10 * time.Millisecond

// coalescerQueue is how many reads the PTY reader may hand over before the
// coalescer takes them: the reader then does not wait for the coalescer's
// goroutine to be scheduled after every read (a few MB/s on a loaded
// machine).
const coalescerQueue = 64

// MaxBatch is the default CoalescerOptions.MaxBatch. Only output faster
// than about 2.6 MB/s reaches it, where coalescing saves nothing anyway.
const MaxBatch = 64 << 10

// Batch is a run of output bytes cut at a ground-state point. Offset is the
// position of Data's first byte in the session's output.
type Batch struct {
	Offset int64
	Data   []byte
}

// CoalescerOptions configure a Coalescer; NewCoalescer fills zero values.
type CoalescerOptions struct {
	// Window is the coalescing window; default Window.
	Window time.Duration
	// MaxBatch bounds a batch: once this many bytes wait within a window
	// they go out at once, cut at the last cut point, instead of at the
	// window's end. A relay can then pace a viewer in units no larger than
	// about this (plus one read). It also bounds an unfinished sequence:
	// bytes after the last cut point wait for their sequence to end however
	// long that takes (a lone ESC, half a UTF-8 character or an unfinished
	// title show nothing anyway), unless they pile up past MaxBatch — a
	// string sequence that never ends — and then go out as they are at the
	// window's end. Waiting by time instead cut sequences in half whenever
	// a loaded machine left the program unscheduled for a few windows.
	// Default MaxBatch.
	MaxBatch int
	// EchoWindow is how long after Input output is sent at once; default
	// EchoWindow.
	EchoWindow time.Duration
	// Clock makes the window timers; default the system clock.
	Clock Clock
	// Emit receives batches in order, from the coalescer's goroutine.
	// While it runs, Write blocks once Queue reads wait: a slow consumer
	// slows the reader.
	Emit func(Batch)
	// Queue is how many writes may wait for the coalescer's goroutine;
	// default coalescerQueue, negative for none (Write returns once the
	// coalescer has the bytes: tests that drive the clock need that).
	Queue int
}

// Coalescer turns output chunks into batches: the first bytes after a quiet
// window go out at once, and so does output within EchoWindow of a viewer's
// input (an echo is never held, even while a spinner keeps the window
// open); other output is gathered and sent at each window's end while it
// keeps coming. Batches end only at cut points (see Cutter); bytes after
// the last one wait for the next window.
type Coalescer struct {
	in      chan []byte   // to the run goroutine
	done    chan struct{} // closed when run has returned
	once    sync.Once
	opts    CoalescerOptions // static after construction
	inputAt atomic.Int64     // Clock's UnixNano of the last Input; 0 for none
}

// NewCoalescer starts a Coalescer; Close flushes it and waits for it.
func NewCoalescer(o CoalescerOptions) *Coalescer {
	if o.Window <= 0 {
		o.Window = Window
	}
	if o.Clock == nil {
		o.Clock = systemClock{}
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = MaxBatch
	}
	if o.EchoWindow <= 0 {
		o.EchoWindow = EchoWindow
	}
	if o.Queue == 0 {
		o.Queue = coalescerQueue
	}
	c := &Coalescer{in: make(chan []byte, max(o.Queue, 0)), done: make(chan struct{}), opts: o}
	go c.run()
	return c
}

// Write hands p (copied) to the coalescer. It must not be called after or
// concurrently with Close.
func (c *Coalescer) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	select {
	case c.in <- append([]byte(nil), p...):
		return len(p), nil
	case <-c.done:
		return 0, ErrClosed
	}
}

// Input tells the coalescer a viewer just typed: output in the next
// EchoWindow goes out at once. It never blocks.
func (c *Coalescer) Input() {
	c.inputAt.Store(c.opts.Clock.Now().UnixNano())
}

// echoing reports whether output now follows an input closely enough to be
// its echo.
func (c *Coalescer) echoing() bool {
	at := c.inputAt.Load()
	return at != 0 && c.opts.Clock.Now().UnixNano()-at <= int64(c.opts.EchoWindow)
}

// Close emits everything pending, whole, and waits for the last Emit: at the
// end of a stream no later byte can complete a sequence.
func (c *Coalescer) Close() error {
	c.once.Do(func() { close(c.in) })
	<-c.done
	return nil
}

// pending is the run goroutine's state.
type pending struct {
	cutter        *Cutter
	buf           []byte
	clear, ground int   // cut points in buf, -1 for none
	offset        int64 // stream offset of buf[0]
}

func (c *Coalescer) run() {
	defer close(c.done)
	p := &pending{cutter: NewCutter(), clear: -1, ground: -1}
	var timer Timer
	var timerC <-chan time.Time
	active := false // bytes arrived since the window opened
	for {
		select {
		case chunk, ok := <-c.in:
			if !ok {
				if timer != nil {
					timer.Stop()
				}
				c.emit(p, len(p.buf))
				return
			}
			p.add(chunk)
			if timer != nil {
				active = true
				if c.echoing() {
					c.emit(p, p.ground) // all of the echo, not just up to its CR
				} else if len(p.buf) >= c.opts.MaxBatch {
					c.emit(p, p.cut())
				}
				continue
			}
			c.emit(p, p.cut())
			timer = c.opts.Clock.NewTimer(c.opts.Window)
			timerC, active = timer.C(), false
		case <-timerC:
			if !active && len(p.buf) == 0 {
				timer, timerC = nil, nil
				continue
			}
			c.windowEnd(p)
			timer = c.opts.Clock.NewTimer(c.opts.Window)
			timerC, active = timer.C(), false
		}
	}
}

// windowEnd emits what can be cut, or everything once more than MaxBatch
// bytes wait with no cut point.
func (c *Coalescer) windowEnd(p *pending) {
	if cut := p.cut(); cut > 0 {
		c.emit(p, cut)
	} else if len(p.buf) >= c.opts.MaxBatch {
		c.emit(p, len(p.buf))
	}
}

// emit sends buf[:n] and keeps the rest in a new array: an emitted batch
// is never written again, so Emit may keep it.
func (c *Coalescer) emit(p *pending, n int) {
	if n <= 0 {
		return
	}
	c.opts.Emit(Batch{Offset: p.offset, Data: p.buf[:n]})
	rest := p.buf[n:]
	p.buf = nil
	if len(rest) > 0 || n >= c.opts.MaxBatch/2 {
		// bulk output: one array per batch rather than one per doubling
		p.buf = append(make([]byte, 0, max(c.opts.MaxBatch+32<<10, len(rest))), rest...)
	}
	p.offset += int64(n)
	p.clear, p.ground = shift(p.clear, n), shift(p.ground, n)
}

func shift(at, n int) int {
	if at <= n {
		return -1
	}
	return at - n
}

// add appends a chunk and its cut points.
func (p *pending) add(chunk []byte) {
	clear, ground := p.cutter.Scan(chunk)
	if clear >= 0 {
		p.clear = len(p.buf) + clear
	}
	if ground >= 0 {
		p.ground = len(p.buf) + ground
	}
	p.buf = append(p.buf, chunk...)
}

// cut prefers a point that ends any pending wrap, else the last ground one.
func (p *pending) cut() int {
	if p.clear > 0 {
		return p.clear
	}
	return p.ground
}
