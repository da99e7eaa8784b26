package server

import (
	"net/http"
	"net/netip"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tabbridge/tabbridge/store"
)

// metrics are this instance's Prometheus metrics (docs/API.md, "/metrics").
// Each server has its own registry, so several servers in one test process
// do not collide. Every field is static after newMetrics.
type metrics struct {
	reg      *prometheus.Registry
	browsers prometheus.Gauge
	daemons  prometheus.Gauge
	calls    *prometheus.CounterVec
	latency  prometheus.Histogram
	lag      prometheus.Histogram
	// forwards counts calls sent to the instance holding the browser, by
	// result ("ok": an answer came back, the page's error included;
	// "failed": the instance could not be reached or went away);
	// forwardLatency is the time from sending to the answer.
	forwards       *prometheus.CounterVec
	forwardLatency prometheus.Histogram
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		browsers: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tabbridge_browsers_connected",
			Help: "Browser (extension) sockets this instance holds."}),
		daemons: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tabbridge_daemons_connected",
			Help: "Terminal daemon sockets this instance holds."}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tabbridge_calls_total",
			Help: "Tool calls this instance finished, by outcome (the audit log's outcome)."}, []string{"outcome"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tabbridge_call_duration_seconds",
			Help:    "Duration of the tool calls this instance finished, approval wait included.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tabbridge_signal_lag_seconds",
			Help:    "Delay from publishing to receiving this instance's own PostgreSQL NOTIFY pings (notification lag).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 5}}),
	}
	m.forwards = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tabbridge_forwarded_calls_total",
		Help: "Tool calls this instance forwarded to the instance holding the browser, by result: ok (an answer came back) or failed (that instance was unreachable or went away)."}, []string{"result"})
	m.forwardLatency = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tabbridge_forward_duration_seconds",
		Help:    "Time from forwarding a call to the other instance's answer (the page's own time included).",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}})
	m.reg.MustRegister(m.browsers, m.daemons, m.calls, m.latency, m.lag, m.forwards, m.forwardLatency,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) observeLag(d time.Duration) { m.lag.Observe(d.Seconds()) }

func (m *metrics) forwarded(d time.Duration, err error) {
	if err != nil {
		m.forwards.WithLabelValues("failed").Inc()
		return
	}
	m.forwards.WithLabelValues("ok").Inc()
	m.forwardLatency.Observe(d.Seconds())
}

func (m *metrics) callFinished(e *store.AuditEntry) {
	if e.Outcome == store.OutcomeRunning {
		return
	}
	m.calls.WithLabelValues(e.Outcome).Inc()
	m.latency.Observe(float64(e.DurationMS) / 1000)
}

// registerGauges adds the gauges read at scrape time from the server's
// state; called once the pieces they read exist.
func (s *Server) registerGauges() {
	gauge := func(name, help string, f func() float64) {
		s.metrics.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f))
	}
	gauge("tabbridge_mcp_sessions", "MCP sessions open on this instance.", func() float64 {
		if s.mcp == nil {
			return 0
		}
		n := 0
		for range s.mcp.Sessions() {
			n++
		}
		return float64(n)
	})
	gauge("tabbridge_approvals_pending", "Approval requests calls on this instance wait on.", func() float64 { return float64(s.gate.InFlight()) })
	gauge("tabbridge_instances", "Living instances in the registry, this one included, as its last sweep saw them.", func() float64 { return float64(s.registry.Size()) })
	gauge("tabbridge_signal_bus_healthy", "1 while this instance receives every signal (LISTEN up, self-pings arriving), else 0.", func() float64 {
		if s.bus.Healthy() {
			return 1
		}
		return 0
	})
}

// MetricsHandler serves the metrics, for a separate listen address.
func (s *Server) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{})
}

// mountMetrics serves /metrics on the main address only to this computer
// (docs/DECISIONS.md, "Metrics are not public"): a Prometheus on the same
// host scrapes it, and anything else (another machine, a client through a
// reverse proxy) is told to use --metrics-listen. The metrics tell who is
// active (browsers and daemons connected, calls and approvals waiting), and
// on the public address anyone could watch them.
func (s *Server) mountMetrics() {
	if !s.opts.MetricsElsewhere {
		s.app.Get("/metrics", s.localOnly, adaptor.HTTPHandler(s.MetricsHandler()))
	}
}

// forwardingHeaders are the headers a reverse proxy adds: a loopback peer
// that is not a trusted proxy but sends one is a proxy passing on a client
// from elsewhere.
var forwardingHeaders = []string{fiber.HeaderXForwardedFor, "Forwarded", "X-Real-Ip", "X-Forwarded-Host", fiber.HeaderVia}

// localOnly lets a request through only from a loopback client address
// (with trusted proxies, the client's as they recorded it).
func (s *Server) localOnly(c *fiber.Ctx) error {
	addr, err := netip.ParseAddr(s.clientAddress(c))
	local := err == nil && addr.Unmap().IsLoopback()
	if peer, ok := netip.AddrFromSlice(c.Context().RemoteIP()); local && ok && !s.trusted(peer.Unmap()) {
		for _, h := range forwardingHeaders {
			if len(c.Request().Header.Peek(h)) > 0 {
				local = false
			}
		}
	}
	if !local {
		return errorf(http.StatusForbidden, codeMetricsLocalOnly, "/metrics on this address answers only this computer (a loopback address). "+
			"To scrape it from elsewhere, start the server with --metrics-listen <address> (TABBRIDGE_METRICS_LISTEN) and point Prometheus there; "+
			"behind a reverse proxy, do not route /metrics.")
	}
	return c.Next()
}
