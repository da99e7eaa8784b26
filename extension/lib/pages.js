// pages.js is the worker's side of the page link: it owns the bridges' ports, the record of which
// document offers which tools (kept in chrome.storage.session, since Chrome may stop the worker at
// any time), and the calls in flight, each tied to the one document it was sent to.
//
// A call goes to the most recently used document of its origin offering the tool in a version the
// call's gate allows (tabs.js): a call the server let run without asking the person (the tool was
// read-only, or a standing grant covered it) runs only where the tool is still read-only, or still
// not consequential. If the open documents offer the tool only otherwise, or a reopened page does,
// nothing runs: the call fails with tool_changed. With no open document offering the tool, the
// tool's own page (the address the server says last offered it, else the site's last
// address) is reopened in a background tab and the call waits until that page's tools settle:
// the page has loaded and announced nothing new for SETTLE_MS. If it offers the tool by then the
// call runs (if the gate allows that version); if not, the call fails at once with what the page
// does offer.
//
// A declarative tool whose form navigated (executeTool resolved null) is followed: once the
// tab's new page has loaded, its first <script type="application/ld+json"> is the result. A document's port closing fails only that
// document's calls; a result that was posted before the close arrives first (one ordered port).

import './messages.js';
import { announce, emptyRecord, forget, forgetTab, touchTab, documentsOf } from './documents.js';
import { allows, candidates, chooseDocument, offers, toolOf } from './tabs.js';
import { originOf } from './protocol.js';

const M = globalThis.TabbridgeMessages;
const PORT_NAME = 'tabbridge-bridge';
const STORE_KEY = 'pages';

// DEFAULT_TIMEOUT_MS is a call's deadline when the caller gives none (the server's is 60 s).
export const DEFAULT_TIMEOUT_MS = 60000;

// SETTLE_MS is how long a reopened page must stay quiet (loaded, no new announcement) before its
// tools count as settled. Pages register tools asynchronously; 3 s finds a tool registered up to
// about 3 s after load (or after the page's previous registration).
export const SETTLE_MS = 3000;

// CallError codes say why a call failed, for the server to phrase for the agent.
export const codes = Object.freeze({
  noSite: 'site_not_open', // no document offers the tool, and no address to reopen or Chrome could not open it
  noTool: 'tool_not_registered', // a reopened page did not register the tool in time
  toolChanged: 'tool_changed', // the pages offer the tool only in a version the call's gate does not allow (a write, or consequential)
  pageGone: 'page_gone', // the document unloaded or went into the back/forward cache mid-call
  timeout: 'timeout',
  cancelled: 'cancelled',
  toolError: 'tool_error', // the page's execute threw or rejected; error is the page's message
  refused: 'refused', // the extension refused a malformed message
  tooLarge: 'result_too_large', // the page's result is over 256 KiB; size says how large
});

const fail = (code, error) => ({ ok: false, code, error });

// Pages is created once per worker start.
export class Pages {
  constructor({ now = Date.now, log = console, settleMs = SETTLE_MS } = {}) {
    this.now = now;
    this.log = log;
    this.settleMs = settleMs;
    this.rec = emptyRecord();
    this.ports = new Map(); // documentId → {port, origin}
    this.calls = new Map(); // callId → {documentId, port, settle}
    this.waiters = new Set(); // functions run after every announcement, given the announcing tab's id
    this.reopening = new Map(); // origin → promise of the reopened tab's document
    this.blocked = new Map(); // documentId → why that page runs nothing now: {notSent, cut} (see block)
    // onChange runs after the record of documents changed (the server link announces the
    // difference); onUse after the person used a tab.
    this.onChange = () => {};
    this.onUse = () => {};
  }

  async load() {
    const { [STORE_KEY]: saved } = await chrome.storage.session.get(STORE_KEY);
    if (saved && saved.docs && saved.tabUsed && saved.addresses) this.rec = saved;
  }

  // recheck asks every remembered document without a port to reconnect, and forgets those that
  // cannot: Chrome closes every bridge port when it stops the worker, so a document restored from
  // storage that unloaded meanwhile (or later) would otherwise stay in the record, its site shown
  // open to the server and its tools in the popup. The worker runs it on every start; it waits only
  // for the bridges' replies, not for their announcements (those wait for the worker's start).
  async recheck() {
    const stale = [];
    await Promise.all(Object.values(this.rec.docs).map(async (d) => {
      if (this.ports.has(d.documentId)) return;
      try {
        await chrome.tabs.sendMessage(d.tabId, { type: 'connect' }, { documentId: d.documentId });
      } catch {
        stale.push(d.documentId);
      }
    }));
    let changed = false;
    for (const id of stale) {
      if (this.ports.has(id) || !this.rec.docs[id]) continue; // it announced meanwhile
      forget(this.rec, id);
      changed = true;
    }
    if (changed) this.save();
  }

  save() {
    chrome.storage.session.set({ [STORE_KEY]: this.rec }).catch((e) => this.log.warn('tabbridge: save pages', e));
    try {
      this.onChange();
    } catch (e) {
      this.log.warn('tabbridge: after a change of documents', e);
    }
  }

  // accepts says whether a port comes from one of our bridges in a top frame of a tab.
  static accepts(port) {
    const s = port.sender;
    return port.name === PORT_NAME && s && s.id === chrome.runtime.id && s.tab && s.frameId === 0 &&
      typeof s.documentId === 'string' && typeof s.origin === 'string' && s.origin !== 'null';
  }

  // attach takes a new bridge port; listeners are added at once so no message is missed, and the
  // handlers wait for ready so they run in order after the record is loaded.
  attach(port, ready) {
    if (!Pages.accepts(port)) {
      port.disconnect();
      return;
    }
    const { documentId, origin, tab } = port.sender;
    port.onMessage.addListener((msg) => ready.then(() => this.onMessage(port, documentId, origin, tab.id, msg)));
    port.onDisconnect.addListener(() => ready.then(() => this.onGone(port, documentId)));
  }

  onMessage(port, documentId, origin, tabId, raw) {
    const r = M.checkBridgeMessage(raw, origin);
    if (!r.ok) {
      this.log.warn(`tabbridge: refused a message from ${origin}: ${r.reason}`);
      if (raw && M.checkCallId(raw.callId)) this.settle(raw.callId, documentId, fail(codes.refused, `The page sent a result the extension refused: ${r.reason}.`));
      return;
    }
    const m = r.msg;
    if (m.type === 'announce') {
      this.ports.set(documentId, { port, origin });
      announce(this.rec, { documentId, tabId, origin, url: m.url, title: m.title, tools: m.tools, now: this.now() });
      this.save();
      for (const w of [...this.waiters]) w(tabId);
      return;
    }
    if (m.type === 'dialog') {
      this.block(documentId, m.open && {
        notSent: `The page shows ${dialogSays(m)}, waiting for the person to answer it in the tab; nothing of the page runs until then, so the call was not sent. Ask the person to answer it, then call again.`,
        cut: `The page opened ${dialogSays(m)} just as the call was sent. The dialog stops the page until the person answers it in the tab; the call may run once they do. Ask them, or check the page's state, before calling again.`,
      });
      return;
    }
    if (m.type === 'frozen') {
      this.block(documentId, m.frozen && {
        notSent: 'Chrome has frozen the tab of this page (it freezes background tabs to save power): nothing of the page runs until the tab is shown again, so the call was not sent. Ask the person to open the tab, then call again.',
        cut: 'Chrome froze the tab of this page while the call was running (it freezes background tabs to save power): nothing of the page runs until the tab is shown again, so no answer can come now. The call may have run, and may go on once the tab is shown: check the page\'s state before calling again.',
      });
      return;
    }
    const outcome = m.ok ? { ok: true, result: m.result } : fail(m.code ?? codes.toolError, m.error);
    if (m.navigating) outcome.navigating = true;
    if (m.size !== undefined) outcome.size = m.size;
    this.settle(m.callId, documentId, outcome);
  }

  // refused tells a document's bridge which of its tools were not shared and why, so the site's
  // developer reads it in the page's console (a tool that is simply missing says nothing). by is
  // who refused them: the Tabbridge server, or this extension.
  refused(documentId, tools, by) {
    const live = this.ports.get(documentId);
    if (!live || tools.length === 0) return;
    try {
      live.port.postMessage({ type: 'refused', by, tools });
    } catch {
      // The page is gone; its tools went with it.
    }
  }

  // block notes that a page runs nothing now, and why, or (why null) that it runs again: it
  // opened alert(), confirm() or prompt() and waits for the person (its observer has already
  // ended the calls it was running, saying so), or Chrome froze its tab (a background tab, to
  // save power). The calls sent to it meanwhile wait in the page and would answer only at their
  // deadline, though they may run once it runs again: they end now with why.cut (and are
  // cancelled, which the page hears when it runs again), and no call is sent while it is blocked.
  block(documentId, why) {
    if (!why) {
      this.blocked.delete(documentId);
      return;
    }
    this.blocked.set(documentId, why);
    for (const [id, c] of [...this.calls]) {
      if (c.documentId === documentId) this.cancel(id, fail(codes.toolError, why.cut));
    }
  }

  onGone(port, documentId) {
    const live = this.ports.get(documentId);
    if (live?.port !== port) {
      // An older port of a restored page; or, with no port known, one whose announcement was
      // refused, which may still have said the page was blocked.
      if (!live) this.blocked.delete(documentId);
      return;
    }
    this.ports.delete(documentId);
    this.blocked.delete(documentId);
    forget(this.rec, documentId);
    this.save();
    for (const [id, c] of [...this.calls]) {
      if (c.documentId === documentId) this.settle(id, documentId, fail(codes.pageGone, 'The page went away (it was closed, navigated or put in the back/forward cache) while the call was running.'));
    }
  }

  // settle ends a call once; only the document it was sent to may answer it.
  settle(callId, documentId, outcome) {
    const c = this.calls.get(callId);
    if (!c || c.documentId !== documentId) return;
    this.calls.delete(callId);
    c.settle(outcome);
  }

  // tabUsed notes a use of a tab; at is when it happened (now when not given).
  tabUsed(tabId, at = this.now()) {
    touchTab(this.rec, tabId, at);
    this.save();
    this.onUse(tabId);
  }

  tabClosed(tabId) {
    forgetTab(this.rec, tabId);
    this.save();
  }

  // tabInfo is what the popup shows for a tab: its site and how many tools it registers. url is
  // the tab's address now: a document of another origin is an old one not yet known to be gone.
  tabInfo(tabId, url) {
    let origin = null;
    try {
      origin = new URL(url).origin;
    } catch {
      // No address known: every document of the tab counts.
    }
    const docs = documentsOf(this.rec, tabId).filter((d) => origin === null || d.origin === origin).sort((a, b) => b.announcedAt - a.announcedAt);
    if (docs.length === 0) return null;
    const d = docs[0];
    return { origin: d.origin, url: d.url, title: d.title, tools: d.tools.map((t) => t.name) };
  }

  // look is what the popup shows for a tab at url when the record may know nothing of it: the
  // tab's info, null (no tools), or {needsReload: true} when detection is on but the tab's page
  // has no bridge (it loaded before detection was turned on: registered content scripts run only
  // in documents loaded afterwards). A bridge found this way also reconnects and announces.
  async look(tabId, url, detecting) {
    const info = this.tabInfo(tabId, url);
    if (info || !detecting || !/^https?:/.test(url ?? '')) return info;
    try {
      await chrome.tabs.sendMessage(tabId, { type: 'connect' }, { frameId: 0 });
      return null;
    } catch {
      return { needsReload: true };
    }
  }

  // waitFor resolves with pick()'s first non-null answer after an announcement (or with what the
  // promise also resolves with, if that comes first), or null at the deadline or when signal
  // aborts.
  waitFor(pick, deadline, signal, also) {
    return new Promise((resolve) => {
      const done = (v) => {
        this.waiters.delete(check);
        clearTimeout(timer);
        signal?.removeEventListener('abort', stop);
        resolve(v);
      };
      const check = () => {
        const v = pick();
        if (v) done(v);
      };
      const stop = () => done(null);
      const timer = setTimeout(stop, Math.max(0, deadline - this.now()));
      signal?.addEventListener('abort', stop);
      this.waiters.add(check);
      also?.then((v) => done(v));
      check();
    });
  }

  // portFor returns a live port to a document, asking a remembered document to reconnect when
  // the worker was restarted since it announced. Null means the document is gone.
  // A page that runs nothing (frozen, or showing a dialog) does not answer at all: the question
  // gives up at the deadline or when signal aborts, and call() then ends without forgetting it.
  async portFor(doc, deadline, signal) {
    const live = this.ports.get(doc.documentId);
    if (live) return live.port;
    const asked = chrome.tabs.sendMessage(doc.tabId, { type: 'connect' }, { documentId: doc.documentId }).then(() => true, () => false);
    const answered = await this.waitFor(() => null, deadline, signal, asked);
    if (!answered) return null;
    const got = await this.waitFor(() => this.ports.get(doc.documentId), Math.min(deadline, this.now() + 5000), signal);
    return got ? got.port : null;
  }

  // reopen opens url (the tool's own page; else the site's last address) in a background tab,
  // once per address at a time, and waits until that tab offers the tool or its tools settle. It
  // resolves with {doc}, {offers: names} (settled without the tool), {doc: null} (the deadline or
  // the signal came first) or, when Chrome could not open the tab (no window open, say),
  // {failed: outcome}; it never rejects.
  async reopen(origin, tool, deadline, signal, toolUrl) {
    const url = toolUrl ?? this.rec.addresses[origin]?.url;
    if (!url) return { doc: null };
    if (!this.reopening.has(url)) {
      const opened = Promise.resolve()
        .then(() => chrome.tabs.create({ url, active: false }))
        .then((tab) => ({ tabId: tab.id }), (e) => ({ failed: fail(codes.noSite, `No open tab of ${origin} offers the tool "${tool}", and Chrome could not reopen ${url} in a new tab: ${e?.message ?? e}. Open the site in Chrome (with a window open), then call again.`) }))
        .finally(() => this.reopening.delete(url));
      this.reopening.set(url, opened);
    }
    const r = await this.reopening.get(url);
    if (r.failed) return r;
    return this.settleIn(r.tabId, origin, tool, deadline, signal);
  }

  // settleIn waits in one tab for a document of origin offering tool, or until the tab has loaded
  // and no document of it announced for SETTLE_MS (then it resolves with what the tab offers).
  settleIn(tabId, origin, tool, deadline, signal) {
    const inTab = () => Object.values(this.rec.docs).filter((d) => d.tabId === tabId && d.origin === origin);
    return new Promise((resolve) => {
      let loaded = false;
      let quiet = null;
      const done = (v) => {
        this.waiters.delete(check);
        clearTimeout(timer);
        clearTimeout(quiet);
        chrome.tabs.onUpdated.removeListener(onUpdated);
        signal?.removeEventListener('abort', stop);
        resolve(v);
      };
      const settled = () => done({ offers: [...new Set(inTab().flatMap((d) => d.tools.map((t) => t.name)))].sort() });
      const restart = () => {
        clearTimeout(quiet);
        if (loaded) quiet = setTimeout(settled, this.settleMs);
      };
      // from is the tab that announced: another tab's announcements (a page churning its tools
      // elsewhere) say nothing of this page and must not keep it from settling.
      const check = (from) => {
        const doc = inTab().find((d) => offers(d, tool));
        if (doc) done({ doc });
        else if (from === tabId) restart(); // the page is still registering
      };
      const onUpdated = (id, info) => {
        if (id !== tabId || info.status !== 'complete') return;
        loaded = true;
        restart();
      };
      const stop = () => done({ doc: null });
      const timer = setTimeout(stop, Math.max(0, deadline - this.now()));
      signal?.addEventListener('abort', stop);
      chrome.tabs.onUpdated.addListener(onUpdated);
      this.waiters.add(check);
      chrome.tabs.get(tabId).then((tab) => tab.status === 'complete' && onUpdated(tabId, { status: 'complete' }), () => done({ offers: [] }));
      check();
    });
  }

  // until settles with p's value, or with null at the deadline or when signal aborts, whichever
  // comes first (p is left to settle on its own).
  until(p, deadline, signal) {
    return new Promise((resolve, reject) => {
      const done = (f, v) => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', stop);
        f(v);
      };
      const stop = () => done(resolve, null);
      const timer = setTimeout(stop, Math.max(0, deadline - this.now()));
      signal?.addEventListener('abort', stop);
      if (signal?.aborted) stop();
      p.then((v) => done(resolve, v), (e) => done(reject, e));
    });
  }

  // follow waits for the tab's navigation (started by a form tool) to load and reads the new
  // page's first application/ld+json script: the form's result, as the WebMCP explainer says. A
  // page of another origin is not read; the agent is told where the form went.
  async follow(tabId, origin, deadline, signal) {
    const loaded = await new Promise((resolve) => {
      const done = (v) => {
        clearTimeout(timer);
        chrome.tabs.onUpdated.removeListener(onUpdated);
        chrome.tabs.onRemoved.removeListener(onRemoved);
        signal?.removeEventListener('abort', stop);
        resolve(v);
      };
      const onUpdated = (id, info, tab) => id === tabId && info.status === 'complete' && done(tab);
      const onRemoved = (id) => id === tabId && done('closed'); // the page was left by closing its tab
      const stop = () => done(null);
      const timer = setTimeout(stop, Math.max(0, deadline - this.now()));
      signal?.addEventListener('abort', stop);
      chrome.tabs.onUpdated.addListener(onUpdated);
      chrome.tabs.onRemoved.addListener(onRemoved);
      chrome.tabs.get(tabId).catch(() => done('closed'));
    });
    if (loaded === 'closed') return fail(codes.pageGone, 'The tab running the form was closed before the form answered.');
    if (!loaded) return signal?.aborted ? fail(codes.cancelled, 'The call was cancelled.') : fail(codes.timeout, 'The form navigated, but the page it went to did not finish loading before the deadline.');
    let url;
    try {
      url = new URL(loaded.url);
    } catch {
      return fail(codes.toolError, 'The form navigated, and the tab no longer shows a page the extension can read.');
    }
    if (url.origin !== origin) return elsewhere(url.origin);
    // The tab is read by its id, so whatever document it shows when the script runs is read: the
    // page the form went to may have moved on meanwhile (a redirect to a payment provider, or the
    // page's own script sending the tab to another site where the person is signed in). The read
    // itself checks the origin, in the same document and the same task as it reads.
    // The read waits no longer than the call: a page that keeps its main thread (a dialog shown
    // on load, a script that never yields) would hold the injected script, and the call, forever.
    let read;
    try {
      const ran = await this.until(chrome.scripting.executeScript({ target: { tabId }, func: readJsonLd, args: [origin] }), deadline, signal);
      if (ran === null) {
        return signal?.aborted ? fail(codes.cancelled, 'The call was cancelled.') :
          fail(codes.timeout, `The form navigated to ${url.href}, but that page could not be read before the deadline (a dialog on it, or a script that does not let go). Look at the tab, then call again.`);
      }
      [{ result: read }] = ran;
    } catch (e) {
      return fail(codes.toolError, `The form navigated to ${url.href}, but that page could not be read: ${e?.message ?? e}.`);
    }
    if (!read || typeof read !== 'object') return fail(codes.toolError, `The form navigated to ${url.href}, but that page went away before it could be read.`);
    if (typeof read.elsewhere === 'string') return elsewhere(read.elsewhere);
    const out = { navigated: true, url: read.url, title: read.title };
    if (read.jsonLd === null) {
      out.note = 'The page the form went to has no <script type="application/ld+json">, so no structured result.';
      return { ok: true, result: out };
    }
    try {
      out.result = JSON.parse(read.jsonLd);
    } catch {
      out.note = 'The first application/ld+json script of the page the form went to is not valid JSON; its text is given as it is.';
      out.result = read.jsonLd;
    }
    return { ok: true, result: out };
  }

  // call runs tool with args in the best document of origin and resolves with {ok, result} or
  // {ok: false, code, error}; it never rejects. Aborting signal cancels it in the page. url is
  // where to reopen the site when the worker knows no address of its own (the server's last
  // address); gate is why the server let the call run (protocol.js), which limits the documents
  // that may run it; onDispatch(documentId) is told the document the call is sent to.
  async call({ callId = crypto.randomUUID(), origin, tool, args, timeoutMs = DEFAULT_TIMEOUT_MS, signal, url, gate = '', onDispatch }) {
    const fallbackUrl = typeof url === 'string' && url !== '' && originOf(url) === origin ? url : undefined;
    const deadline = this.now() + timeoutMs;
    for (let tries = 0; tries < 8; tries++) {
      if (signal?.aborted) return fail(codes.cancelled, 'The call was cancelled.');
      if (this.now() >= deadline) return fail(codes.timeout, `No answer within ${timeoutMs} ms.`);
      let doc = chooseDocument(this.rec, origin, tool, gate);
      if (!doc) {
        // Open pages offering the tool only in a version the gate does not allow: nothing reopens.
        const other = candidates(this.rec, origin, tool);
        if (other.length > 0) {
          const n = new Set(other.map((d) => d.tabId)).size;
          return toolChanged(`The open tab${n > 1 ? 's' : ''} of ${origin} now offer${n > 1 ? '' : 's'}`, tool, gate, other.map((d) => toolOf(d, tool)));
        }
        // Open pages of the site that do not offer the tool: if one is the tool's own page (or
        // the server named no page), the tool is gone from it; otherwise its page is reopened.
        const open = Object.values(this.rec.docs).filter((d) => d.origin === origin);
        const here = fallbackUrl ? open.filter((d) => pageAddress(d.url) === pageAddress(fallbackUrl)) : open;
        if (here.length > 0) {
          const names = [...new Set(here.flatMap((d) => d.tools.map((t) => t.name)))].sort();
          const which = fallbackUrl ? `The open tab of ${pageAddress(fallbackUrl)}, the page that offered "${tool}",` : `The open tabs of ${origin}`;
          return fail(codes.noTool, `${which} no longer offer${fallbackUrl ? 's' : ''} the tool "${tool}"; ${fallbackUrl ? 'it offers' : 'they offer'}: ${names.join(', ') || 'no tools'}. Nothing was run.`);
        }
        if (!this.rec.addresses[origin] && !fallbackUrl) return fail(codes.noSite, `No open tab of ${origin} offers the tool "${tool}", and the extension does not know the site's address to reopen it.`);
        const reopened = await this.reopen(origin, tool, deadline, signal, fallbackUrl);
        if (reopened.failed) return { ...reopened.failed }; // shared by every call waiting on the attempt
        const where = fallbackUrl ?? this.rec.addresses[origin]?.url;
        if (reopened.offers) return fail(codes.noTool, `${where} was reopened in a background tab, and once its tools settled it no longer offers "${tool}"; it offers: ${reopened.offers.join(', ') || 'no tools'}. Nothing was run.`);
        doc = reopened.doc;
        if (!doc) return signal?.aborted ? fail(codes.cancelled, 'The call was cancelled.') : fail(codes.noTool, `${where} was reopened in a background tab but did not register the tool "${tool}" before the deadline. Nothing was run.`);
        if (!allows(toolOf(doc, tool), gate)) return toolChanged(`${where} was reopened in a background tab, and it now offers`, tool, gate, [toolOf(doc, tool)]);
      }
      const port = this.ports.get(doc.documentId)?.port ?? await this.portFor(doc, deadline, signal);
      // A document that reconnected announced again meanwhile: it may offer the tool otherwise now.
      const current = port && this.rec.docs[doc.documentId] && toolOf(this.rec.docs[doc.documentId], tool);
      if (current && !allows(current, gate)) continue;
      if (port) {
        // The call goes on the port first and the server hears where it went just after, in the
        // same task: the page starts on it while the worker writes call.dispatched, and no port
        // close or result can come in between.
        const sent = this.send(port, doc.documentId, { callId, tool, args }, deadline, signal);
        onDispatch?.(doc.documentId);
        const outcome = await sent;
        if (!outcome.navigating) return outcome;
        // The old document is about to be reported gone: the call now belongs to no document
        // (a documentId that never announces), so that report does not fail it. This runs in
        // the microtask after the result, before the port's close is handled.
        onDispatch?.(`following-${callId}`);
        return this.follow(doc.tabId, origin, deadline, signal);
      }
      if (signal?.aborted) return fail(codes.cancelled, 'The call was cancelled.');
      if (this.now() >= deadline) return fail(codes.timeout, 'The page did not answer before the deadline: its tab may be frozen by Chrome or showing a dialog. Nothing was sent to it.');
      forget(this.rec, doc.documentId);
      this.save();
    }
    return fail(codes.pageGone, `Every tab of ${origin} went away before the call could start.`);
  }

  // send posts the call on the document's port and waits for its outcome.
  send(port, documentId, { callId, tool, args }, deadline, signal) {
    const blocked = this.blocked.get(documentId);
    if (blocked) return Promise.resolve(fail(codes.toolError, blocked.notSent));
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.cancel(callId, fail(codes.timeout, 'The page did not answer before the deadline.')), Math.max(0, deadline - this.now()));
      const onAbort = () => this.cancel(callId, fail(codes.cancelled, 'The call was cancelled.'));
      signal?.addEventListener('abort', onAbort);
      this.calls.set(callId, {
        documentId,
        port,
        settle: (outcome) => {
          clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
          resolve(outcome);
        },
      });
      try {
        port.postMessage({ type: 'call', callId, tool, args });
      } catch {
        this.settle(callId, documentId, fail(codes.pageGone, 'The page went away before the call could be sent.'));
      }
    });
  }

  // cancel ends a call with outcome and tells its page, whose execute sees its signal abort.
  cancel(callId, outcome = fail(codes.cancelled, 'The call was cancelled.')) {
    const c = this.calls.get(callId);
    if (!c) return false;
    try {
      c.port.postMessage({ type: 'cancel', callId, reason: outcome.error });
    } catch {
      // The page is gone; its port's close settles nothing more, as the call ends here.
    }
    this.settle(callId, c.documentId, outcome);
    return true;
  }
}

// toolChanged fails a call the server let run without asking the person (gate read-only or
// grant) because the pages that would run it now offer the tool as versions the gate does not
// allow; where begins the sentence ("The open tab of https://shop.example now offers").
function toolChanged(where, tool, gate, versions) {
  const consequential = versions.filter((t) => t.annotations?.consequentialHint === true).length;
  const as = [consequential < versions.length && 'a tool that changes something', consequential > 0 && 'a consequential tool'].filter(Boolean).join(' or ');
  const why = gate === 'grant' ? 'because of a standing grant when it checked the call, and a grant never covers a consequential tool' : 'because the tool was read-only when it checked the call';
  const needs = consequential === versions.length ? "the person's approval every time it runs" : "the person's approval";
  return fail(codes.toolChanged, `${where} "${tool}" as ${as}, but the server let this call run without asking the person ${why}. Nothing was run. Call getSiteToolDefinition to see the tool as it is now, then call again with a taskId, since it now needs ${needs}.`);
}

// dialogSays names a page's dialog for the agent: an alert() dialog saying "…".
function dialogSays({ kind, text }) {
  return `${kind === 'alert' ? 'an' : 'a'} ${kind}() dialog${text ? ` saying ${JSON.stringify(text)}` : ''}`;
}

// elsewhere is the answer of a form that went to a page of another origin than the site's: that
// page is never read (the site was shared, not the other one), and the agent is told where it went.
function elsewhere(origin) {
  return { ok: true, result: { navigated: true, url: origin, note: `The form navigated to another site (${origin}); its page is not read.` } };
}

// readJsonLd runs in the page a form navigated to (chrome.scripting, the isolated world): its
// address, title and first application/ld+json script's text, only if the document is of origin
// (the site's); else only the origin it is of. It is one synchronous function in that document,
// so no navigation can come between the check and the read.
function readJsonLd(origin) {
  if (location.origin !== origin) return { elsewhere: location.origin };
  const s = document.querySelector('script[type="application/ld+json"]');
  return { url: location.href, title: document.title, jsonLd: s ? s.textContent : null };
}

// pageAddress is an address without its fragment, unless the fragment is a hash-routed app's
// route (#/cart, #!/cart): the page a tool belongs to, as the server's catalog counts pages
// (sitetools.PageAddress).
export function pageAddress(url) {
  const i = url.indexOf('#');
  return i < 0 || url.startsWith('#/', i) || url.startsWith('#!', i) ? url : url.slice(0, i);
}
