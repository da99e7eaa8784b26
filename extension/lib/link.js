// link.js owns the worker's one WebSocket to the server (docs/PROTOCOL.md). ServerLink asks for a
// ticket with the sign-in cookie, dials /ws/extension, says hello, pings, keeps the server's view
// of this browser's documents exact (tools.announce, document.used, document.gone), runs the
// server's calls through Pages and answers them, and hands approval counts to the worker.
//
// The socket is open only while at least one site is shared: the worker learns the list from
// welcome and sites; with none shared it closes and stays closed until kick() (a Share click).
// A dropped socket is dialled again with backoff (lib/backoff.js). teardown() is the one place a
// socket ends and is safe to run any number of times.
//
// A call's deadline is the server's clock, and this browser's clock may be off by any amount: the
// link pings at once on every welcome and measures the offset from each pong's time, and the time
// it gives a call is bounded (protocol.js callTimeout).

import { Backoff } from './backoff.js';
import { getServer } from './config.js';
import { ticket, socketURL, SignedOutError } from './api.js';
import { parseFrame, hello, browserName, plan, openSites, resultMessage, retryable, clockOffset, callTimeout, PING_MS } from './protocol.js';

const STORE_KEY = 'link';

// SIGNED_OUT_RETRY_MS is how often the keep-alive alarm (every 30 s) may ask for a ticket again
// while signed out: the person may sign in in a tab the popup never sees afterwards. A little under
// the period, so an alarm firing early does not skip a turn.
export const SIGNED_OUT_RETRY_MS = 25000;
const ID_KEY = 'browserId';

// browserIdentity returns this browser's stable id (generated once, kept in storage.local), its
// default name and the extension's version.
export async function browserIdentity() {
  let { [ID_KEY]: browserId } = await chrome.storage.local.get(ID_KEY);
  if (typeof browserId !== 'string' || !/^[A-Za-z0-9_-]{8,64}$/.test(browserId)) {
    browserId = crypto.randomUUID();
    await chrome.storage.local.set({ [ID_KEY]: browserId });
  }
  const { os } = await chrome.runtime.getPlatformInfo();
  return { browserId, name: browserName(os), version: chrome.runtime.getManifest().version };
}

export class ServerLink {
  // onApprovals takes each approvals message; onApprovalsUnknown runs when the count shown is no
  // longer known (the server changed, or the person is signed out).
  constructor({ pages, onApprovals = () => {}, onApprovalsUnknown = () => {}, log = console, now = Date.now }) {
    this.pages = pages;
    this.announcing = new Map(); // announcement id → documentId, the last 256
    this.onApprovals = onApprovals;
    this.onApprovalsUnknown = onApprovalsUnknown;
    this.log = log;
    this.now = now;
    this.backoff = new Backoff();
    this.shared = null; // the person's shared sites from the last welcome/sites; null = not known yet
    this.ws = null;
    this.open = false; // welcomed on this.ws
    this.gen = 0; // bumped by every connect and teardown: a stale dial gives up
    this.state = 'idle'; // idle | connecting | open | waiting | signed-out | stopped
    this.lastError = '';
    this.signedOutAt = 0; // when a ticket last found the person signed out
    this.sent = new Map(); // documentId → signature announced on this socket
    this.sentOpen = ''; // the last sites.open list sent on this socket, as JSON
    this.calls = new Map(); // callId → AbortController of a call from the server
    // callId → documentId of a running call whose call.dispatched is not sent yet. The server
    // uses it for one thing: a document.gone fails the calls dispatched to that document. So it
    // is sent just before the next document.gone (sync), and never for a call answered first:
    // a call costs one frame each way, not two up.
    this.dispatching = new Map();
    this.retryTimer = null;
    this.pingTimer = null;
    this.seq = 0;
    this.pingSent = null; // {id, at} of the ping whose pong is awaited
    this.clockOffset = null; // the server's clock minus this browser's, in ms; null until a pong
    this.stats = { connects: 0, welcomes: 0, refreshes: 0, tickets: 0 };
  }

  async load() {
    const { [STORE_KEY]: saved } = await chrome.storage.session.get(STORE_KEY);
    if (saved && (saved.shared === null || Array.isArray(saved.shared))) this.shared = saved.shared;
  }

  save() {
    chrome.storage.session.set({ [STORE_KEY]: { shared: this.shared } }).catch((e) => this.log.warn('tabbridge: save link', e));
  }

  // wanted says whether a socket should be open: some site is shared, or the list is not known.
  wanted() {
    return this.shared === null || this.shared.length > 0;
  }

  sharedOrigins() {
    return new Set((this.shared ?? []).map((s) => s.origin));
  }

  // start connects if a socket is wanted; the worker calls it on every start.
  start() {
    if (this.wanted()) this.connect();
  }

  // ensure dials again if a socket is wanted and none is open or on its way (the keep-alive alarm
  // calls it, in case the worker was stopped while it waited to retry). Signed out, it asks for a
  // ticket again at most every SIGNED_OUT_RETRY_MS (the person may have signed in, and only the
  // popup calls wake). Stopped by a close that must not be retried (4000, 4001, 4002), it waits
  // for kick or wake instead.
  ensure() {
    if (!this.wanted() || this.retryTimer !== null) return;
    if (this.state === 'signed-out') {
      if (this.now() - this.signedOutAt >= SIGNED_OUT_RETRY_MS) this.connect();
      return;
    }
    if (!['open', 'connecting', 'stopped'].includes(this.state)) this.connect();
  }

  // wake tries again after the person was found signed out (the popup saw them signed in).
  wake() {
    if (this.state === 'signed-out') {
      this.backoff.reset();
      this.connect();
      return;
    }
    this.ensure();
  }

  // kick connects now, whatever was known: the person shared a site, signed in, or changed the
  // server. The welcome then says which sites are shared.
  kick({ forget = false } = {}) {
    if (forget) {
      this.shared = null;
      this.save();
      this.onApprovalsUnknown();
    }
    this.backoff.reset();
    if (this.state === 'open' && !forget) return;
    this.shared = this.shared && this.shared.length > 0 ? this.shared : null;
    this.connect();
  }

  status() {
    return { state: this.state, shared: this.shared, lastError: this.lastError, stats: { ...this.stats }, announced: [...this.sent.keys()], calls: [...this.calls.keys()], clockOffset: this.clockOffset };
  }

  async connect() {
    this.teardown();
    const gen = this.gen;
    this.state = 'connecting';
    let server;
    let t;
    try {
      server = await getServer();
      t = await ticket(server, { onRefresh: () => this.stats.refreshes++ });
      this.stats.tickets++;
    } catch (e) {
      if (gen !== this.gen) return;
      this.lastError = String(e?.message ?? e);
      if (e instanceof SignedOutError) {
        this.state = 'signed-out';
        this.signedOutAt = this.now();
        this.onApprovalsUnknown();
        return;
      }
      this.retry();
      return;
    }
    if (gen !== this.gen) return;
    let ws;
    try {
      ws = new WebSocket(socketURL(server, t));
    } catch (e) {
      this.lastError = String(e?.message ?? e);
      this.retry();
      return;
    }
    this.stats.connects++;
    this.ws = ws;
    ws.onopen = () => {
      if (this.ws !== ws) return;
      browserIdentity().then((id) => this.ws === ws && this.send(hello(id)));
    };
    ws.onmessage = (ev) => {
      if (this.ws === ws) this.onFrame(ev.data);
    };
    ws.onclose = (ev) => {
      if (this.ws === ws) this.closed(ev.code, ev.reason);
    };
    ws.onerror = () => {}; // a close event follows
  }

  // teardown ends the socket, its ping and the calls it carried; safe to run twice.
  teardown() {
    this.gen++;
    clearTimeout(this.retryTimer);
    this.retryTimer = null;
    clearInterval(this.pingTimer);
    this.pingTimer = null;
    this.pingSent = null;
    this.open = false;
    this.sent = new Map();
    this.sentOpen = '';
    for (const ctl of this.calls.values()) ctl.abort();
    this.calls.clear();
    this.dispatching.clear();
    const ws = this.ws;
    this.ws = null;
    if (ws) {
      ws.onopen = ws.onmessage = ws.onclose = ws.onerror = null;
      try {
        ws.close(1000);
      } catch {
        // Already closed.
      }
    }
  }

  // stop closes the socket and stays closed (no site shared).
  stop() {
    this.teardown();
    this.state = 'idle';
  }

  closed(code, reason) {
    this.teardown();
    this.lastError = `closed ${code}${reason ? ` (${reason})` : ''}`;
    if (!this.wanted()) {
      this.state = 'idle';
      return;
    }
    if (!retryable(code)) {
      this.state = 'stopped';
      return;
    }
    this.retry();
  }

  retry() {
    this.state = 'waiting';
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      this.connect();
    }, this.backoff.next());
  }

  send(msg) {
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) return false;
    try {
      this.ws.send(JSON.stringify(msg));
      return true;
    } catch {
      return false;
    }
  }

  // ping sends a ping and remembers when, to measure the server's clock from its pong.
  ping() {
    const id = `p${++this.seq}`;
    const at = this.now();
    if (this.send({ type: 'ping', id })) this.pingSent = { id, at };
  }

  onPong(m) {
    const p = this.pingSent;
    if (!p || m.id !== p.id) return;
    this.pingSent = null;
    const offset = clockOffset(p.at, this.now(), m.time);
    if (offset !== null) this.clockOffset = offset;
  }

  onFrame(data) {
    const r = parseFrame(data);
    if (!r.ok) {
      this.log.warn(`tabbridge: refused a message from the server: ${r.reason}`);
      if (r.callId && this.open) {
        this.send(resultMessage(r.callId, { ok: false, code: 'refused', error: `The extension could not read the call (${r.reason}). Update the Tabbridge extension and the server to matching versions, then call again.` }));
      }
      return;
    }
    const m = r.msg;
    switch (m.type) {
      case 'welcome':
        this.open = true;
        this.state = 'open';
        this.stats.welcomes++;
        this.backoff.reset();
        globalThis.TabbridgeMessages.useLimits(m.limits); // the server's own, for the checks and the calls
        this.pingTimer = setInterval(() => this.ping(), m.pingMs || PING_MS);
        this.setShared(m.sharedSites);
        if (this.open) this.ping(); // the clock offset, before the first call if possible
        break;
      case 'sites':
        this.setShared(m.sharedSites);
        break;
      case 'call':
        this.runCall(m);
        break;
      case 'call.cancel':
        this.calls.get(m.callId)?.abort();
        this.calls.delete(m.callId);
        this.dispatching.delete(m.callId);
        break;
      case 'approvals':
        this.onApprovals(m);
        break;
      case 'pong':
        this.onPong(m);
        break;
      case 'error':
        this.log.warn(`tabbridge: the server says ${m.code}: ${m.message}`);
        // superseded: the server held the announcement back (more than its pace) and a newer
        // one of the same document replaced it, or the document went; nothing was refused.
        if (this.announcing.has(m.ref) && m.code !== 'site_not_shared' && m.code !== 'superseded') this.pages.refused(this.announcing.get(m.ref), [{ tool: '*', reason: m.message }], 'server');
        break;
      case 'tools.accepted':
        if (m.refused.length > 0) this.pages.refused(m.documentId, m.refused, 'server');
        break;
      default:
        break; // browser: nothing to do
    }
  }

  setShared(sites) {
    this.shared = sites;
    this.save();
    if (sites.length === 0) {
      this.stop();
      return;
    }
    this.sync();
  }

  // sync announces what changed since the last announcement on this socket. The calls still
  // running tell the server their documents first, so a document.gone below fails them.
  sync() {
    if (!this.open) return;
    const { messages, sent } = plan(this.sent, this.pages.rec.docs, this.sharedOrigins(), this.pages.rec.tabUsed);
    this.sent = sent;
    if (messages.some((m) => m.type === 'document.gone')) this.sendDispatched();
    for (const m of messages) {
      if (m.type !== 'tools.announce') {
        this.send(m);
        continue;
      }
      const id = `a-${++this.seq}`;
      // Which document each recent announcement was of, so the server's refusal of one reaches
      // that page's console (pages.refused).
      this.announcing.set(id, m.documentId);
      if (this.announcing.size > 256) this.announcing.delete(this.announcing.keys().next().value);
      this.send({ ...m, id });
    }
    const open = openSites(this.pages.rec.docs, this.sharedOrigins(), this.pages.rec.tabUsed);
    const text = JSON.stringify(open);
    if (text !== this.sentOpen) {
      this.sentOpen = text;
      this.send({ type: 'sites.open', id: `s-${++this.seq}`, sites: open });
    }
  }

  // used tells the server a tab's announced documents were used.
  used(tabId) {
    if (!this.open) return;
    for (const d of Object.values(this.pages.rec.docs)) {
      if (d.tabId === tabId && this.sent.has(d.documentId)) this.send({ type: 'document.used', documentId: d.documentId, lastUsed: this.now() });
    }
    this.sync(); // the site's lastUsed in sites.open
  }

  // sendDispatched sends the call.dispatched of every running call that has not sent it.
  sendDispatched() {
    for (const [callId, documentId] of this.dispatching) {
      if (this.calls.has(callId)) this.send({ type: 'call.dispatched', callId, documentId });
    }
    this.dispatching.clear();
  }

  // runCall runs one call from the server and answers it, unless it was cancelled meanwhile (the
  // server then expects no answer). It always answers: Pages.call is not meant to reject, but if
  // it does the agent hears why now instead of at the deadline.
  async runCall(m) {
    const ctl = new AbortController();
    this.calls.set(m.callId, ctl);
    let outcome;
    try {
      outcome = await this.pages.call({
        callId: m.callId, origin: m.site, tool: m.tool, args: m.args, url: m.url, gate: m.gate,
        timeoutMs: callTimeout(m.deadline, this.now(), this.clockOffset), signal: ctl.signal,
        onDispatch: (documentId) => this.calls.get(m.callId) === ctl && this.dispatching.set(m.callId, documentId),
      });
    } catch (e) {
      this.log.warn('tabbridge: a call failed in the extension', e);
      outcome = { ok: false, code: 'refused', error: `The extension could not run the call: ${e?.message ?? e}. Call again; if it keeps failing, reload the Tabbridge extension.` };
    }
    if (this.calls.get(m.callId) !== ctl) return;
    this.calls.delete(m.callId);
    this.dispatching.delete(m.callId); // answered: where it ran no longer matters
    this.send(resultMessage(m.callId, outcome));
  }
}
