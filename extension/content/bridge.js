// bridge.js runs in the isolated world at document_start in the top frame, before observer.js
// (its registration id sorts first). It links the observer in the page's world to the service
// worker:
//
//   observer ⇄ bridge: CustomEvents on window whose type is a random nonce this script puts on
//   <html> (the observer removes it before any page script runs); the detail is a JSON string.
//   bridge ⇄ worker: one long-lived chrome.runtime port. The worker learns the document from
//   the port's sender.documentId; results and the port closing ("page gone") travel on the same
//   ordered channel, so a navigating tool's result arrives before its page is reported gone.
//
// The port is opened only once the page has registered a tool, so pages without WebMCP never
// wake the worker. Chrome closes the port when the page enters the back/forward cache and does
// not run content scripts again on restore, so a persisted pageshow reconnects and re-announces.
// A page's tool changes are coalesced into announcements (see changed), and only the browser's
// own lifecycle events count: a page can dispatch a pageshow, pagehide, freeze or resume of its
// own (isTrusted false) as often as it likes.
// Every message from the page's world is checked by TabbridgeMessages (lib/messages.js).
(() => {
  'use strict';

  const M = globalThis.TabbridgeMessages;
  const html = document.documentElement;
  if (!M || !html) return;

  const nonce = crypto.randomUUID();
  html.setAttribute('data-tabbridge-nonce', nonce);

  let port = null;
  let tools = null; // the page's last tool list, checked; null until it registers one

  // A page Chrome prerenders (speculation rules, or the address bar guessing where the person
  // goes) runs its scripts, and registers its tools, before anyone sees it. A port it opened
  // then would come from a main frame whose frameId is not 0 (Chrome gives prerendered pages
  // other frame ids), which the worker refuses as a subframe's, and the page, once shown, would
  // have no port and its tools would never be announced. So nothing is sent while the document
  // is prerendering; its activation (prerenderingchange) announces what it has by then, on a
  // port whose sender is the tab's shown page.
  let prerendering = document.prerendering === true;

  function toPage(msg) {
    msg.from = 'bridge';
    window.dispatchEvent(new CustomEvent(nonce, { detail: JSON.stringify(msg) }));
  }

  // post sends msg on the port, opening one if there is none, except while the page goes into
  // the back/forward cache: Chrome is closing its ports then, and the worker, which has heard the
  // old port close, has failed that document's calls already (a result the observer sends as the
  // page is cached has no call left to answer).
  function post(msg) {
    if (port === null && (caching || prerendering)) return;
    try {
      connect().postMessage(msg);
    } catch {
      port = null; // the extension was reloaded or the worker is gone; the next message retries
    }
  }

  function announcement() {
    return { type: 'announce', url: location.href, title: document.title, tools };
  }

  // A page that registers and withdraws tools on a timer (every few milliseconds) would send its
  // whole list to the worker, and the worker to the server, on every change: frames of up to a
  // megabyte, hundreds a second. So the changes are coalesced. The first goes at the end of the
  // current task (a page registering its tools in a loop announces them together); later ones at
  // most once per gap that grows with the announcement's size, GAP_MS plus GAP_MS_PER_KIB per
  // KiB. What is pending goes at once before anything else this bridge sends (a tool's result,
  // a dialog, a frozen page) and before the page leaves, so the worker and the server never act
  // on a list older than what the page answers with. A new port (connect) starts with the tools.
  const GAP_MS = 250;
  const GAP_MS_PER_KIB = 1;
  let stale = false; // the tools changed since they were last sent
  let timer = null; // the coming announcement, while one is scheduled
  let quietUntil = 0; // performance.now() before which no change is announced unless flushed
  let toolsChars = 0; // the length of the page's last tool list as JSON text

  // The leading edge waits for the end of the current task, not of its microtasks: Chromium
  // resolves each registerTool promise of a loop in a microtask of its own (measured), so a page
  // registering its tools in a loop is heard one tool at a time until the task ends. It is a
  // message to this script itself: a timer would wait up to a second in a background tab (the
  // worker reopens a site in one), where Chrome throttles timers but not messages.
  const endOfTask = new MessageChannel();
  endOfTask.port1.onmessage = () => timer === true && flush();

  // changed notes that the page's tools changed and schedules their announcement.
  function changed() {
    stale = true;
    if (timer !== null) return;
    const wait = quietUntil - performance.now();
    if (wait > 0) {
      timer = setTimeout(flush, wait);
      return;
    }
    timer = true; // the leading edge
    endOfTask.port2.postMessage(null);
  }

  // flush sends the pending announcement now, if there is one. Not while the page goes into
  // the back/forward cache (see pagehide): the restore announces afresh on a new port.
  function flush() {
    if (stale && !caching) announce();
  }

  // announce sends the page's tools now, on a new port if there is none.
  function announce() {
    if (tools === null || prerendering) return; // stale stays set: the activation announces
    if (port === null) {
      connect();
      return;
    }
    try {
      sendTools(port);
    } catch {
      port = null; // the extension was reloaded or the worker is gone; the next message retries
    }
  }

  // sendTools posts the tools on p and starts the gap before the next change may be announced.
  function sendTools(p) {
    if (timer !== null && timer !== true) clearTimeout(timer);
    timer = null;
    stale = false;
    const msg = announcement();
    p.postMessage(msg);
    const kib = (toolsChars + msg.url.length + msg.title.length) / 1024;
    quietUntil = performance.now() + GAP_MS + GAP_MS_PER_KIB * kib;
  }

  // connect opens the port; a new port always starts with the page's tools, so the worker knows
  // this document before anything else arrives on it.
  function connect() {
    if (port) return port;
    const p = chrome.runtime.connect({ name: 'tabbridge-bridge' });
    port = p;
    p.onMessage.addListener(fromWorker);
    p.onDisconnect.addListener(() => {
      void chrome.runtime.lastError;
      if (port === p) port = null;
    });
    if (tools !== null) sendTools(p);
    return p;
  }

  // warn tells the site's developer, in the page's console, why tools the page registered are
  // not shared (a missing tool says nothing by itself): each tool and reason once per page, and
  // what arrives within a quarter second (a page registering its tools in a loop announces after
  // each) in one line per reason. refused is [{name, reason}]; the name '*' is the page's whole
  // list, and an empty name a tool whose name was refused (its reason says which). Neither is a
  // tool name a page can register.
  const warned = new Set();
  let pending = [];
  let flushing = false;
  function warn(refused, by) {
    for (const { name, reason } of refused) {
      const key = `${by}\n${name}\n${reason}`;
      if (warned.has(key) || warned.size > 4096) continue;
      warned.add(key);
      pending.push({ name, reason, by });
    }
    if (pending.length > 0 && !flushing) {
      flushing = true;
      setTimeout(flushWarnings, 250);
    }
  }

  function flushWarnings() {
    const groups = new Map();
    for (const p of pending) {
      const k = `${p.by}\n${p.reason}`;
      if (!groups.has(k)) groups.set(k, { by: p.by, reason: p.reason, names: [] });
      groups.get(k).names.push(p.name);
    }
    pending = [];
    flushing = false;
    for (const { by, reason, names } of groups.values()) {
      const quoted = names.map((n) => `"${n}"`);
      const what = names[0] === '*' ? "this page's tools" : names[0] === '' ? 'a WebMCP tool' : names.length === 1 ? `the WebMCP tool ${quoted[0]}` :
        `${names.length} WebMCP tools (${quoted.slice(0, 5).join(', ')}${names.length > 5 ? ', …' : ''})`;
      console.warn(`Tabbridge: ${by} did not share ${what}: ${reason.replace(/\.$/, '')}.`);
    }
  }

  function fromWorker(raw) {
    const r = M.checkWorkerMessage(raw);
    if (!r.ok) {
      if (raw && M.checkCallId(raw.callId)) post({ type: 'result', callId: raw.callId, ok: false, error: `The extension refused the call: ${r.reason}.` });
      return;
    }
    if (r.msg.type === 'refused') {
      warn(r.msg.tools.map((t) => ({ name: t.tool, reason: t.reason })), r.msg.by === 'server' ? 'the Tabbridge server' : 'the Tabbridge extension');
      return;
    }
    // The result cap goes with the call, so the observer refuses a result far over it without
    // sending it here (a 200 MB string took seconds to cross and be parsed).
    if (r.msg.type === 'call') r.msg.max = M.limits.maxResultBytes;
    toPage(r.msg);
  }

  function fromPage(ev) {
    const r = M.parsePageMessage(ev.detail);
    if (!r.ok) {
      if (r.whole) warn([{ name: '*', reason: r.reason }], 'the Tabbridge extension');
      if (r.callId) post({ type: 'result', callId: r.callId, ok: false, error: `The extension refused the page's answer: ${r.reason}. This is the site's to fix; no arguments change it.` });
      return;
    }
    if (r.refused) warn(r.refused, 'the Tabbridge extension');
    if (r.msg === null) return;
    if (r.msg.type === 'tools') {
      tools = r.msg.tools;
      toolsChars = ev.detail.length;
      changed();
      return;
    }
    if (r.msg.type === 'dialog' && tools === null) return; // no tools, so no calls to hold back
    flush();
    post(r.msg);
  }

  // A persisted pageshow is a restore from the back/forward cache: the old port was closed.
  function onPageshow(ev) {
    if (!ev.isTrusted) return;
    caching = false;
    if (ev.persisted && tools !== null) {
      port = null;
      announce();
    }
  }

  // Chrome freezes background tabs to save power (DevTools can too): a frozen page runs nothing,
  // this script included, so a call sent to it would wait unanswered until the tab is shown. The
  // page's lifecycle events come just before it freezes and as it resumes; the worker ends the
  // calls in flight and sends none meanwhile. They go only on a port already open, and not
  // while the page goes into the back/forward cache (it hears freeze after a persisted pagehide,
  // and Chrome is closing its port then); one restored hears resume before pageshow reconnects
  // (and announces afresh).
  //
  // A page leaving for good sends its pending announcement first (a result the observer sends
  // as it leaves goes after it anyway). One going into the cache does not: Chrome is closing its
  // port, the worker forgets the document when it closes, and the restore announces afresh.
  let caching = false;
  function onPagehide(ev) {
    if (!ev.isTrusted) return;
    caching = ev.persisted;
    if (port !== null) flush();
  }
  function tell(msg) {
    if (tools === null || port === null || caching) return;
    flush();
    try {
      port.postMessage(msg);
    } catch {
      port = null;
    }
  }
  function onPrerenderingChange(ev) {
    if (!ev.isTrusted || !prerendering) return;
    prerendering = false;
    announce();
  }
  const onFreeze = (ev) => ev.isTrusted && tell({ type: 'frozen', frozen: true });
  const onResume = (ev) => ev.isTrusted && tell({ type: 'frozen', frozen: false });

  // document.open() erases every listener on the window and the document, this world's too (and
  // document.write() after the page loaded opens it): the page stays the same document, with the
  // same port and its tools still registered, but nothing it sent would be heard and every call
  // would wait for its deadline (measured on Chromium 156). Its childList change of the document
  // is seen here, before any other task, and the listeners are added again; adding one still
  // there does nothing. The observer, whose mutation observer was made after this one, then
  // sends the page's tools again.
  function listen() {
    window.addEventListener(nonce, fromPage);
    window.addEventListener('pageshow', onPageshow);
    window.addEventListener('pagehide', onPagehide);
    document.addEventListener('freeze', onFreeze);
    document.addEventListener('resume', onResume);
    document.addEventListener('prerenderingchange', onPrerenderingChange);
  }
  listen();
  new MutationObserver(listen).observe(document, { childList: true });

  // The worker, started afresh, has no ports; it asks a document it remembers to reconnect.
  chrome.runtime.onMessage.addListener((msg, sender, reply) => {
    if (sender.id !== chrome.runtime.id || sender.tab || !msg || msg.type !== 'connect') return false;
    announce();
    reply({ ok: tools !== null && !prerendering });
    return false;
  });
})();
