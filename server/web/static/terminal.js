// Tabbridge terminal page: one session's live terminal in xterm.js, over the
// viewer socket (docs/PROTOCOL-terminals.md). An ES module with no build step:
// the wire (frames, close codes, sizes) is lib/frames.js and the retry wait
// lib/backoff.js, both tested by server/web/test. xterm.js and its add-ons are
// classic scripts the page loads before it (deferred, in order).
//
// - Renderer: WebGL, tried by actually loading it (it fails late, inside the
//   add-on's activate, where there is no GPU); the DOM renderer otherwise. A
//   lost WebGL context is rebuilt once; a second loss drops to the DOM
//   renderer for good. The state is in #term-host[data-renderer].
// - Output is written with term.write(data, callback) and acknowledged from
//   the callback, so the server's window tracks what xterm.js has really
//   processed, not what the socket has buffered.
// - Input: every onData goes out at once as one input frame holding exactly
//   the bytes xterm.js produced (Esc, arrows, paste alike). Never batched.
//   Input over the server's limit (data-max-input, relay/wire's MaxInput) is
//   not sent: the person is told, in #term-notice, as for input the server
//   refused (a "refused" message).
// - Pastes lose their control characters but tab, LF and CR (lib/paste.js):
//   xterm.js sends a pasted ESC [201~ as it is, which ends a bracketed
//   paste early and types the rest. The person is told what was removed.
// - Hyperlinks (OSC 8) the program wrote open only after a question that
//   names the real site (lib/links.js), never with a user name in them,
//   and in a tab with no opener or referrer. The question is the page's
//   own <dialog> (#link-ask), not window.confirm, which a cross-site frame
//   in the extension's popup cannot rely on.
// - Widths: the Unicode 11 add-on, as in the daemon's terminal of record and
//   its differential tests (terminal/xtermref), so both count the same cells.
// - Terminal queries (device attributes, status and cursor reports, mode
//   and setting requests, colour queries) are answered once, by the daemon:
//   this xterm.js is silenced for them here, so its answers never reach the
//   program twice. The input stream itself is never filtered.
// - The socket is re-dialled with a fresh ticket, backing off from 1 s to
//   30 s, while retrying can help (a restart, a network loss, the machine
//   offline). What retrying will not fix ends the page with its reason: the
//   session is gone, the person is signed out (a 401 the page cannot renew,
//   or the socket closed with 4004), or the server refuses (any other 4xx,
//   whose message is shown). A session with the most viewers it takes
//   (close 4008) is retried, its reason shown meanwhile.
// - State-changing requests carry the page's CSRF token from its
//   csrf-token meta tag: framed in the extension's popup the page cannot read
//   its cookies.
import { Backoff } from './lib/backoff.js';
import { parseOutput, inputFrame, binaryBytes, fitSize, statusOf, lasting, maxInput, inputRefusal, CLOSE_SIGNED_OUT, CLOSE_TOO_MANY_VIEWERS } from './lib/frames.js';
import { SettleGate, SETTLE_MS } from './lib/settle.js';
import { cleanPaste, pasteNotice } from './lib/paste.js';
import { linkPrompt, WORDS } from './lib/links.js';

// A terminal page another site sent the browser to (data-arrived, see
// lib/settle.js) does not take the keyboard at once: the site may have opened
// it under the person's typing, and every key goes to the program. It is not
// focused on load, and no input is sent until the window has held focus a
// moment.
const arrived = document.body.getAttribute('data-arrived') === 'cross-site';
const settle = new SettleGate(document.hasFocus(), performance.now());
window.addEventListener('focus', () => settle.focus(performance.now()));
window.addEventListener('blur', () => settle.blur());

const page = document.getElementById('term-page');
const host = document.getElementById('term-host');
const stateEl = document.getElementById('term-state');
if (page && host && window.Terminal && window.FitAddon && window.Unicode11Addon) start();

// start runs the page: everything below shares its terminal and socket.
function start() {
  const sessionID = page.getAttribute('data-session');
  const machineID = page.getAttribute('data-machine');
  const enc = new TextEncoder();
  const inputLimit = maxInput(page.getAttribute('data-max-input'));
  const noticeEl = document.getElementById('term-notice');

  const term = new window.Terminal({
    cursorBlink: true,
    fontSize: 13,
    fontFamily: 'ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono", "Liberation Mono", monospace',
    scrollback: 5000,
    allowProposedApi: true, // term.unicode, which the Unicode 11 add-on needs, is a proposed API
    theme: { background: '#0f1115', foreground: '#e6e8eb', cursor: '#e6e8eb', selectionBackground: '#3a4a6b' },
    linkHandler: { activate: function (e, uri) { openLink(uri); } }
  });
  const fit = new window.FitAddon.FitAddon();
  term.loadAddon(fit);
  term.loadAddon(new window.Unicode11Addon.Unicode11Addon());
  term.unicode.activeVersion = '11';
  silenceQueries(term);
  term.open(host);
  window.__term = term; // read by the end-to-end tests; handy in dev tools

  // silenceQueries swallows the sequences xterm.js would answer (the daemon
  // answers them); a handler returning true ends their handling. Everything
  // else, status and mode changes included, goes on to xterm.js.
  function silenceQueries(t) {
    const p = t.parser;
    const yes = function () { return true; };
    p.registerCsiHandler({ final: 'c' }, yes);                      // DA1
    p.registerCsiHandler({ prefix: '>', final: 'c' }, yes);         // DA2
    p.registerCsiHandler({ prefix: '=', final: 'c' }, yes);         // DA3
    p.registerCsiHandler({ final: 'n' }, yes);                      // DSR, CPR
    p.registerCsiHandler({ prefix: '?', final: 'n' }, yes);         // DECDSR, DECXCPR
    p.registerCsiHandler({ intermediates: '$', final: 'p' }, yes);  // DECRQM (ANSI)
    p.registerCsiHandler({ prefix: '?', intermediates: '$', final: 'p' }, yes); // DECRQM (DEC)
    p.registerCsiHandler({ prefix: '>', final: 'q' }, yes);         // XTVERSION
    p.registerCsiHandler({ final: 'x' }, yes);                      // DECREQTPARM
    p.registerCsiHandler({ final: 't' }, function (params) {        // XTWINOPS reports only
      const op = params.length ? params[0] : 0;
      return op === 11 || op === 13 || op === 14 || op === 15 || op === 16 || op === 18 || op === 19 || op === 20 || op === 21;
    });
    p.registerDcsHandler({ intermediates: '$', final: 'q' }, yes);  // DECRQSS
    p.registerDcsHandler({ intermediates: '+', final: 'q' }, yes);  // XTGETTCAP
    [4, 10, 11, 12].forEach(function (id) {                        // colour queries ("?")
      p.registerOscHandler(id, function (data) { return data.split(';').indexOf('?') >= 0; });
    });
  }

  // openLink is a click on a hyperlink the program wrote: the person is
  // asked, with the site as the browser will reach it, before it opens.
  const ask = linkQuestion();
  function openLink(uri) {
    const p = linkPrompt(uri);
    if (p.refused) return notice(p.refused);
    ask(p);
  }

  // linkQuestion builds the page's question about a link (hidden until
  // asked) and returns the function that asks it. Its text is set as text
  // only: the program chose the address. Cancel has the keyboard, so an
  // Enter meant for the terminal opens nothing; Escape cancels too. Open
  // takes no click until the question has been on screen SETTLE_MS: the
  // program chose where its link is, and can put it under the Open button,
  // for the second click of a double-click to land there. The link opens
  // from Open's click (a user gesture: no popup blocker). One question at
  // a time: while one is open, another click asks nothing (the answer must
  // be to the address that was read). After any answer the terminal has
  // the keyboard again.
  function linkQuestion() {
    const d = document.createElement('dialog');
    d.id = 'link-ask';
    d.className = 'link-ask';
    d.setAttribute('aria-labelledby', 'link-ask-title');
    d.setAttribute('aria-describedby', 'link-ask-warning');
    const title = part('h2', 'link-ask-title');
    const site = part('dd', 'link-ask-site');
    const address = part('dd', 'link-ask-address');
    const warning = part('p', 'link-ask-warning');
    const list = document.createElement('dl');
    list.append(part('dt', '', WORDS.site), site, part('dt', '', WORDS.address), address);
    const cancel = part('button', 'link-ask-cancel', WORDS.cancel);
    const open = part('button', 'link-ask-open', WORDS.open);
    cancel.type = open.type = 'button';
    cancel.className = 'btn';
    open.className = 'btn btn-primary';
    cancel.autofocus = true;
    const actions = document.createElement('div');
    actions.className = 'actions';
    actions.append(cancel, open);
    d.append(title, list, warning, actions);
    page.append(d);

    let href = null, holdTimer = null;
    open.addEventListener('click', function () {
      if (!href || open.disabled) return;
      const h = href;
      href = null;
      window.open(h, '_blank', 'noopener,noreferrer');
      d.close('open');
    });
    cancel.addEventListener('click', function () { d.close('cancel'); });
    // A click beside the buttons (the backdrop, the question's margins: the
    // second click of a double-click on the link lands there) leaves the
    // keyboard where it was, on Cancel, rather than on the dialog itself,
    // where Enter would do nothing the person could see.
    d.addEventListener('mousedown', function (e) { if (e.target === d) e.preventDefault(); });
    d.addEventListener('close', function () {
      href = null;
      clearTimeout(holdTimer);
      term.focus();
    });
    return function (p) {
      if (d.open) return;
      href = p.href;
      title.textContent = p.title;
      site.textContent = p.site;
      address.textContent = p.address;
      warning.textContent = p.warning;
      open.disabled = true;
      holdTimer = setTimeout(function () { open.disabled = false; }, SETTLE_MS);
      d.showModal();
      cancel.focus();
    };
  }

  // part makes an element of the question with an id and, if given, text.
  function part(tag, id, text) {
    const e = document.createElement(tag);
    if (id) e.id = id;
    if (text) e.textContent = text;
    return e;
  }

  // ---- renderer ----
  let webgl = null, losses = 0;

  function setRenderer(name) {
    host.setAttribute('data-renderer', name);
    host.setAttribute('data-webgl-losses', String(losses));
  }

  // tryWebgl loads a fresh WebGL add-on and reports whether it took.
  function tryWebgl() {
    if (!window.WebglAddon) return false;
    let addon = null;
    try {
      addon = new window.WebglAddon.WebglAddon();
      term.loadAddon(addon); // activate() makes the context; throws without WebGL2
    } catch (e) {
      if (addon) { try { addon.dispose(); } catch (e2) { /* never activated */ } }
      return false;
    }
    webgl = addon;
    addon.onContextLoss(function () { contextLost(addon); });
    return true;
  }

  // contextLost: a lost context never draws again, and a blank terminal looks
  // like an agent that stopped. Rebuild once; after a second loss stay on
  // the DOM renderer rather than burn GPU contexts in a loop.
  function contextLost(addon) {
    if (addon !== webgl) return;
    webgl = null;
    losses++;
    try { addon.dispose(); } catch (e) { /* disposing puts the DOM renderer back */ }
    setRenderer(losses < 2 && tryWebgl() ? 'webgl' : 'dom');
  }

  setRenderer(tryWebgl() ? 'webgl' : 'dom');

  // ---- mode ----
  let watchOnly = false;
  try { watchOnly = localStorage.getItem('tabbridge.watchOnly') === '1'; } catch (e) { /* storage off */ }
  const watchBtn = document.getElementById('mode-watch');
  const typeBtn = document.getElementById('mode-type');

  function showMode() {
    term.options.disableStdin = watchOnly;
    page.setAttribute('data-mode', watchOnly ? 'watch' : 'type');
    if (watchBtn) watchBtn.setAttribute('aria-pressed', String(watchOnly));
    if (typeBtn) typeBtn.setAttribute('aria-pressed', String(!watchOnly));
  }

  function setMode(w) {
    if (w === watchOnly) { term.focus(); return; }
    watchOnly = w;
    try { localStorage.setItem('tabbridge.watchOnly', w ? '1' : '0'); } catch (e) { /* storage off */ }
    showMode();
    term.focus();
    if (!ended) { backoff.reset(); connect(); } // the mode is the ticket's: dial again
  }
  if (watchBtn) watchBtn.addEventListener('click', function () { setMode(true); });
  if (typeBtn) typeBtn.addEventListener('click', function () { setMode(false); });
  showMode();

  // ---- state shown in the header ----
  let online = false, exited = false, exitCode = 0, connected = false, ended = false;

  function show(state, text) {
    page.setAttribute('data-state', state);
    if (stateEl) stateEl.textContent = text;
  }

  // notice tells the person something they did was not done (input too
  // large), for a while, beside the state; a later notice replaces it.
  let noticeTimer = null;
  function notice(text) {
    if (!noticeEl) return;
    noticeEl.textContent = text;
    noticeEl.hidden = false;
    clearTimeout(noticeTimer);
    noticeTimer = setTimeout(function () { noticeEl.hidden = true; noticeEl.textContent = ''; }, 15000);
  }

  function showLive() {
    // An ended session takes no keys: its Type/Watch toggle is off.
    [watchBtn, typeBtn].forEach(function (b) { if (b) b.disabled = exited; });
    if (exited) return show('exited', 'Exited with status ' + exitCode);
    if (!online) return show('offline', 'Machine offline: waiting for its daemon');
    show('live', watchOnly ? 'Live · watching' : 'Live');
  }

  // ---- socket ----
  // The socket is dialled again after 1 s, doubling to 30 s, while retrying can help.
  const backoff = new Backoff(1000, 30000);
  let ws = null, generation = 0, timer = null, opened = 0;

  function csrfToken() {
    const m = document.querySelector('meta[name="csrf-token"]');
    return m ? m.getAttribute('content') : '';
  }

  // ticket asks for a viewer ticket; a refusal rejects with the status and
  // the server's message.
  function ticket() {
    return fetch('/api/sessions/' + encodeURIComponent(sessionID) + '/viewer-ticket', {
      method: 'POST',
      credentials: 'same-origin',
      headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': csrfToken() },
      body: JSON.stringify({ watchOnly: watchOnly })
    }).then(function (r) {
      if (r.status === 201) return r.json();
      const err = new Error('viewer ticket: ' + r.status);
      err.status = r.status;
      return r.json().then(function (b) {
        err.message = (b && b.error && b.error.message) || err.message;
        throw err;
      }, function () { throw err; });
    });
  }

  // connect asks for a ticket and dials; every earlier socket is abandoned.
  function connect() {
    clearTimeout(timer);
    const gen = ++generation;
    if (ws) { const old = ws; ws = null; old.close(); }
    connected = false;
    show('connecting', 'Connecting…');
    ticket().then(function (t) {
      if (gen === generation) dial(t.url, gen);
    }, function (err) {
      if (gen !== generation) return;
      if (err.status === 404) return sessionMissing(gen);
      if (err.status === 401) return renewSignIn(gen);
      if (lasting(err.status)) return end('refused', 'Cannot connect: ' + err.message);
      retry(gen);
    });
  }

  // renewSignIn loads the page itself, which renews an expired sign-in on the
  // server; a redirect means the person is signed out.
  function renewSignIn(gen) {
    fetch(location.pathname, { credentials: 'same-origin' }).then(function (r) {
      if (gen !== generation) return;
      if (r.redirected) return end('signedout', 'Signed out: sign in again, then reload this page.');
      retry(gen);
    }, function () { if (gen === generation) retry(gen); });
  }

  // sessionMissing tells a session that is gone from one whose machine has
  // not reconnected yet (after a server restart the daemon re-announces its
  // sessions when it is back): the machine's state decides. Online twice in
  // a row without the session means gone.
  let missing = 0;
  function sessionMissing(gen) {
    fetch('/api/machines', { credentials: 'same-origin' }).then(function (r) {
      if (!r.ok) throw new Error('machines: ' + r.status);
      return r.json();
    }).then(function (out) {
      if (gen !== generation) return;
      const m = (out.machines || []).filter(function (x) { return x.id === machineID; })[0];
      if (m && !m.online) {
        missing = 0;
        return retry(gen, 'offline', 'Machine offline: waiting for its daemon');
      }
      if (m && ++missing < 2) return retry(gen);
      end('gone', 'This session is gone: its daemon removed it, or the machine was revoked.');
    }, function () { if (gen === generation) retry(gen); });
  }

  function retry(gen, state, text) {
    if (gen !== generation || ended) return;
    const wait = backoff.next();
    show(state || 'reconnecting', text || 'Connection lost: retrying in ' + Math.round(wait / 1000) + ' s');
    timer = setTimeout(function () { if (gen === generation) connect(); }, wait);
  }

  function end(state, text) {
    ended = true;
    show(state, text);
  }

  function dial(url, gen) {
    const sock = new WebSocket((location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + url);
    sock.binaryType = 'arraybuffer';
    ws = sock;
    const stream = { written: 0, fresh: true }; // per socket: acks count this socket's bytes
    sock.onopen = function () {
      if (gen !== generation) return;
      connected = true;
      backoff.reset();
      missing = 0;
      page.setAttribute('data-connections', String(++opened));
      lastSize = '';
      sendSize();
    };
    sock.onmessage = function (m) {
      if (gen !== generation) return;
      if (typeof m.data === 'string') {
        let c;
        try { c = JSON.parse(m.data); } catch (e) { return; }
        control(c);
      } else {
        output(sock, stream, m.data);
      }
    };
    sock.onclose = function (ev) {
      if (gen !== generation) return;
      ws = null;
      connected = false;
      if (ev.code === CLOSE_SIGNED_OUT) return end('signedout', 'Signed out: sign in again, then reload this page.');
      if (ev.code === CLOSE_TOO_MANY_VIEWERS) return retry(gen, 'reconnecting', (ev.reason || 'This session has the most viewers it takes.') + ' Close a viewer elsewhere; retrying meanwhile.');
      retry(gen);
    };
  }

  function control(c) {
    switch (c.type) {
      case 'session':
        exited = !!(c.session && c.session.exited);
        exitCode = statusOf(c.session && c.session.exitCode);
        break;
      case 'status':
        online = !!c.online;
        break;
      case 'exit':
        exited = true;
        exitCode = statusOf(c.exitCode);
        break;
      case 'refused':
        notice(c.reason || 'The server refused input of ' + c.bytes + ' bytes.');
        return;
      default:
        return;
    }
    showLive();
  }

  // output writes an output or snapshot frame. A snapshot first takes the
  // terminal to its size (and, the socket's first, clears what an earlier
  // socket left), in order with the writes queued before it.
  function output(sock, stream, buf) {
    const f = parseOutput(buf);
    if (!f) return;
    if (f.snapshot) {
      const fresh = stream.fresh;
      stream.fresh = false;
      term.write('', function () {
        if (fresh) term.reset();
        if (f.cols !== term.cols || f.rows !== term.rows) term.resize(f.cols, f.rows);
      });
    }
    const data = f.data;
    term.write(data, function () {
      stream.written += data.length;
      if (sock.readyState === WebSocket.OPEN) sock.send(JSON.stringify({ type: 'ack', bytes: stream.written }));
    });
  }

  function send(bytes) {
    if (watchOnly || !ws || !connected || ws.readyState !== WebSocket.OPEN) return;
    if (arrived) {
      const now = performance.now();
      settle.focus(now); // input came, so the window has focus (from now, if its focus event was missed)
      if (!settle.settled(now)) return;
    }
    if (bytes.length > inputLimit) return notice(inputRefusal(bytes.length, inputLimit));
    ws.send(inputFrame(bytes));
  }

  // Every key goes to the program, Tab included, except one: Ctrl+F6 gives
  // the keyboard back to the page (to the header's back link), so a
  // keyboard-only person can leave the terminal. No common terminal program
  // binds it.
  term.attachCustomKeyEventHandler(function (e) {
    if (e.type === 'keydown' && e.key === 'F6' && e.ctrlKey && !e.altKey && !e.metaKey) {
      e.preventDefault();
      const back = document.querySelector('.term-back');
      if (back) back.focus();
      return false;
    }
    return true;
  });
  // A paste with control characters in it is cleaned before xterm.js sees
  // it: this listener, capturing on the terminal's host, runs before
  // xterm.js's own (on its textarea and element), stops the event and
  // pastes the clean text through xterm.js, which brackets it as usual.
  host.addEventListener('paste', function (e) {
    if (!e.clipboardData) return;
    const c = cleanPaste(e.clipboardData.getData('text/plain'));
    if (c.removed === 0) return;
    e.preventDefault();
    e.stopPropagation();
    term.paste(c.text);
    notice(pasteNotice(c.removed));
  }, true);
  term.onData(function (s) { send(enc.encode(s)); });
  // onBinary carries legacy mouse reports: one byte per character.
  term.onBinary(function (s) { send(binaryBytes(s)); });

  // ---- size ----
  // The session follows the interactive viewer that typed last (or, before
  // anyone typed, any interactive viewer): say what fits this frame, and
  // let the snapshot that follows resize the terminal. Watch-only viewers
  // show the session at its own size.
  let lastSize = '', sizeTimer = null;

  function sendSize() {
    if (watchOnly || !ws || !connected || ws.readyState !== WebSocket.OPEN) return;
    const size = fitSize(fit.proposeDimensions());
    if (!size) return;
    const key = size.cols + 'x' + size.rows;
    if (key === lastSize) return;
    lastSize = key;
    ws.send(JSON.stringify({ type: 'resize', cols: size.cols, rows: size.rows }));
  }

  function sizeSoon() {
    clearTimeout(sizeTimer);
    sizeTimer = setTimeout(sendSize, 80);
  }
  window.addEventListener('resize', sizeSoon);
  if (window.ResizeObserver) new ResizeObserver(sizeSoon).observe(host.parentElement);

  if (!arrived) term.focus();
  connect();
}
