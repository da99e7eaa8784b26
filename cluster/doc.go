// Package cluster lets several Tabbridge server instances share one
// database. It owns three things and nothing else:
//
//   - the instance registry (registry.go): each instance's row (id, internal
//     address, started, heartbeat), renewed every Heartbeat; an instance whose
//     heartbeat is older than DeadAfter, or that stopped, is dead, and the
//     living clean what it left through Options.OnDead. It also records the
//     links (browser and daemon sockets) each instance holds.
//   - the signal bus (bus.go, pgbus.go): small messages to every instance,
//     over PostgreSQL LISTEN/NOTIFY, or in process on SQLite, where one
//     instance is the only supported mode.
//   - the internal transport's client (peer.go): authenticated requests and
//     WebSockets from one instance to another's internal listener, for what
//     does not fit a signal.
//
// It knows nothing of routes, approvals or browsers: the server says what a
// dead instance's leftovers are and what each signal means.
package cluster
