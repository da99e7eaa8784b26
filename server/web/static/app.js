// Tabbridge web app: live regions, copy buttons and tidy addresses, as ES
// modules with no build step (the helpers a test can run without a page are
// in lib/, tested by server/web/test).
//
// Live regions: an element with an id and data-live="type type…" is fetched
// again (the whole page from body[data-src], then that element swapped in)
// when the event stream announces one of those types. After the stream
// drops and reconnects — the server drops a page that falls behind — every
// region is fetched again, since events may have been missed.
//
// A swap keeps what the person was doing: focus returns to the control with
// the same id, <details> with an id keep their open or closed state, fields
// changed but not sent keep their values, and a region whose field has focus
// is not swapped at all until focus leaves the region (then the latest is
// fetched).
// So every focusable control, <details> and field in a live region has a
// stable id.
import { Backoff } from './lib/backoff.js';
import { liveTypes, isField, swapAction, countdown } from './lib/live.js';
import { SettleGate, SETTLE_MS } from './lib/settle.js';

const body = document.body;
const src = body.getAttribute('data-src');

// A page rendered as the answer to a form shows its canonical address, so
// reloading neither re-sends the form nor shows a one-time secret (or a
// "revoked" notice) again.
if (src && location.pathname + location.search !== src) {
  history.replaceState(null, '', src);
}

// Framed (the extension's popup), the header is one compact row.
if (window.top !== window.self) document.documentElement.classList.add('framed');

// The header's menus (<details class="menu">): one open at a time, closed
// by a click outside or Escape (focus goes back to the menu's button).
document.addEventListener('click', (ev) => {
  document.querySelectorAll('details.menu[open]').forEach((d) => {
    if (!d.contains(ev.target)) d.open = false;
  });
});
document.addEventListener('keydown', (ev) => {
  if (ev.key !== 'Escape') return;
  document.querySelectorAll('details.menu[open]').forEach((d) => {
    d.open = false;
    if (d.contains(document.activeElement)) d.querySelector('summary').focus();
  });
});

document.addEventListener('click', (ev) => {
  const btn = ev.target.closest && ev.target.closest('[data-copy]');
  if (!btn) return;
  const from = document.getElementById(btn.getAttribute('data-copy'));
  const status = document.getElementById(btn.getAttribute('data-copy') + '-status');
  if (!from) return;
  copy(from.textContent.trim()).then(() => {
    if (status) status.textContent = 'Copied to the clipboard.';
  }, () => {
    selectText(from);
    if (status) status.textContent = 'Selected: press Ctrl+C (⌘C on a Mac) to copy.';
  });
});

function copy(text) {
  if (navigator.clipboard && window.isSecureContext) {
    return navigator.clipboard.writeText(text);
  }
  return new Promise((resolve, reject) => {
    const ta = document.createElement('textarea');
    ta.value = text;
    ta.setAttribute('aria-hidden', 'true');
    ta.style.position = 'fixed';
    ta.style.opacity = '0';
    document.body.appendChild(ta);
    ta.select();
    let ok = false;
    try { ok = document.execCommand('copy'); } catch { ok = false; }
    ta.remove();
    if (ok) resolve();
    else reject(new Error('copy refused'));
  });
}

function selectText(el) {
  const range = document.createRange();
  range.selectNodeContents(el);
  const sel = window.getSelection();
  sel.removeAllRanges();
  sel.addRange(range);
}

// The answer keys count only once this window has held focus, and the
// request has been on screen, for a moment (lib/settle.js: a hostile site
// can open this page under the person's typing).
const settle = new SettleGate(document.hasFocus() && document.visibilityState === 'visible', performance.now());
// Each card says whether its keys count yet (data-keys="ready" or "waiting"; the keys on its
// buttons are dimmed while waiting), so a key that would do nothing is never a surprise.
let keysTimer = null;
function markKeys() {
  const now = performance.now();
  clearTimeout(keysTimer);
  let again = false;
  let holding = false;
  document.querySelectorAll('[data-request]').forEach((card) => {
    const id = card.getAttribute('data-request');
    const ready = settle.allows(id, now);
    if (card.dataset.keys !== (ready ? 'ready' : 'waiting')) card.dataset.keys = ready ? 'ready' : 'waiting';
    const clicks = settle.clickable(id, now);
    if (card.dataset.clicks !== (clicks ? 'ready' : 'held')) card.dataset.clicks = clicks ? 'ready' : 'held';
    const note = clicks ? card.querySelector('.held-note') : null;
    if (note) note.remove();
    again = again || !ready || !clicks;
    holding = holding || !clicks;
  });
  // While focused (or while a card's clicks are held), a waiting card becomes ready by itself:
  // look again soon.
  if (again && (settle.focused || holding)) keysTimer = setTimeout(markKeys, SETTLE_MS / 4);
}
// Where each request card's answers sit in the page. A card whose answers the page moved (a
// request above it answered, expired or withdrawn by its agent, a notice put before the list, a
// line above them rewrapped) is new again (lib/settle.js), so a click or key aimed at what was
// there does not answer it. What the person does (resizing, opening a card's Raw JSON) only moves
// the mark; scrolling moves nothing, as places are the page's, not the window's.
const places = new Map();
function notePlaces(pageMoved) {
  const now = performance.now();
  const here = new Set();
  document.querySelectorAll('[data-request]').forEach((card) => {
    const id = card.getAttribute('data-request');
    // The answers' own place: a line above them inside the card that rewraps moves them too.
    const r = (card.querySelector('.answer') || card).getBoundingClientRect();
    const place = Math.round(r.left + window.scrollX) + ',' + Math.round(r.top + window.scrollY);
    here.add(id);
    if (pageMoved && places.has(id) && places.get(id) !== place) settle.moved(id, now);
    places.set(id, place);
  });
  for (const id of places.keys()) if (!here.has(id)) places.delete(id);
}
const rebase = () => notePlaces(false);
window.addEventListener('resize', rebase);
document.addEventListener('toggle', rebase, true);
// A card on the page as it loaded is the one the person came to answer; one that arrives later by a
// live update is held a moment (lib/settle.js).
let loaded = false;
const noteRequests = () => {
  const now = performance.now();
  const fresh = settle.shown(Array.from(document.querySelectorAll('[data-request]'), (c) => c.getAttribute('data-request')), now);
  if (loaded) for (const id of fresh) settle.arrived(id, now);
  loaded = true;
  notePlaces(true);
  markKeys();
};
noteRequests();
new MutationObserver((records) => {
  // Only cards coming or going matter (markKeys' own attribute writes are not child changes).
  if (records.some((r) => r.addedNodes.length || r.removedNodes.length)) noteRequests();
}).observe(document.body, { childList: true, subtree: true });

// held says on a card why a click on its answer did nothing; markKeys takes it back once the card's
// answers count.
function held(card, why) {
  if (card.querySelector('.held-note')) return;
  const note = document.createElement('p');
  note.className = 'held-note';
  note.setAttribute('role', 'status');
  note.textContent = why === 'arrived' ? 'This request just arrived. Read it, then answer.' : 'This request just moved here. Read it, then answer.';
  const answers = card.querySelector('.answer');
  if (answers) answers.after(note);
  else card.append(note);
}

// A click on a request's answer counts only once the card has been in its place a moment (since it
// moved there, or arrived by a live update), on every page.
document.addEventListener('click', (ev) => {
  const btn = ev.target && ev.target.closest && ev.target.closest('button, input[type=submit]');
  const card = btn && btn.closest('[data-request]');
  if (!card || !btn.form || btn.type !== 'submit') return;
  notePlaces(true); // a move no mutation announced (a font, a late style) counts too
  const why = settle.heldWhy(card.getAttribute('data-request'), performance.now());
  if (!why) return;
  ev.preventDefault();
  ev.stopImmediatePropagation();
  held(card, why);
  markKeys();
}, true);
const gainFocus = () => { settle.focus(performance.now()); markKeys(); };
const loseFocus = () => { settle.blur(); markKeys(); };
window.addEventListener('focus', gainFocus);
window.addEventListener('blur', loseFocus);
document.addEventListener('visibilitychange', () => {
  if (document.visibilityState === 'visible' && document.hasFocus()) gainFocus();
  else loseFocus();
});
// A page another site sent the browser to holds a click on a form's button
// (an answer, the consent's Allow) until the window has held focus a moment.
if (body.getAttribute('data-arrived') === 'cross-site') {
  document.addEventListener('click', (ev) => {
    const btn = ev.target && ev.target.closest && ev.target.closest('button, input[type=submit]');
    if (!btn || !btn.form || btn.type !== 'submit' || btn.form.method !== 'post') return;
    const now = performance.now();
    settle.focus(now);
    const card = btn.closest('[data-request]');
    if (card ? settle.allows(card.getAttribute('data-request'), now) : settle.settled(now)) return;
    ev.preventDefault();
    ev.stopImmediatePropagation();
  }, true);
}

// Requests answer from the keyboard: Y allows once, A always allows, N
// denies, on the focused request (the one holding focus, else the first),
// each key shown on its button. A key typed into a field, or with a
// modifier, is the field's.
document.addEventListener('keydown', (ev) => {
  if (ev.ctrlKey || ev.metaKey || ev.altKey || ev.repeat || ev.defaultPrevented) return;
  const key = (ev.key || '').toLowerCase();
  if (key !== 'y' && key !== 'a' && key !== 'n') return;
  const active = document.activeElement;
  if (active && (active.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(active.tagName))) return;
  const card = (active && active.closest && active.closest('[data-request]')) || document.querySelector('[data-request]');
  if (!card) return;
  const btn = card.querySelector('button[data-key="' + key + '"]');
  if (!btn || btn.disabled) return;
  ev.preventDefault();
  notePlaces(true);
  const now = performance.now();
  settle.focus(now); // a key arrived, so this window has focus (if its focus event was missed, from now)
  if (!settle.allows(card.getAttribute('data-request'), now)) {
    markKeys();
    return;
  }
  btn.click();
});

// Live countdowns to a request's expiry ("expires in 4:59"), read from
// data-expires each second, so a region swapped in keeps counting.
function countdowns() {
  const now = Date.now();
  document.querySelectorAll('[data-expires]').forEach((el) => {
    const c = countdown(el.getAttribute('data-expires'), now);
    if (!c) return;
    el.textContent = c.text;
    el.classList.toggle('soon', c.soon);
  });
}
if (document.querySelector('[data-expires]') || document.querySelector('[data-live]')) {
  countdowns();
  setInterval(countdowns, 1000);
}

// An answer is sent in place: the inbox's regions are swapped from the
// page the answer returns, so the popup neither flashes nor loses its
// place; the card then says what the answer did. An answer the server
// refused (the request ended meanwhile, or its agent went: 409) was still
// heard, once: the page it returns says why, and that notice is shown here
// — sending the form again would be a second answer, told only that the
// request had ended. Without script, or when the answer's page is not one
// this page can show, the form is sent as usual.
document.addEventListener('submit', (ev) => {
  const form = ev.target;
  if (!form.action || !/\/approvals\/[^/]+\/answer$/.test(new URL(form.action).pathname) || !window.fetch || !document.querySelector('[data-live]')) return;
  ev.preventDefault();
  const data = new URLSearchParams(new FormData(form));
  form.querySelectorAll('button').forEach((b) => { b.disabled = true; });
  fetch(form.action, { method: 'POST', body: data, credentials: 'same-origin', headers: { Accept: 'text/html' } }).then((r) => {
    const refused = r.status === 409 && (r.headers.get('Content-Type') || '').indexOf('text/html') === 0;
    if (!refused && (!r.ok || new URL(r.url).pathname !== location.pathname)) throw new Error('answer ' + r.status);
    return r.text().then((html) => {
      apply(html);
      if (refused) showNotice(html);
    });
  }).catch(() => form.submit());
});

// showNotice puts the notice of a page the server returned (#page-notice)
// in place of this page's, or before its first live region.
function showNotice(html) {
  const fresh = new DOMParser().parseFromString(html, 'text/html').getElementById('page-notice');
  const old = document.getElementById('page-notice');
  if (!fresh) return;
  const node = document.importNode(fresh, true);
  if (old) old.replaceWith(node);
  else {
    const region = document.querySelector('[data-live]');
    region.parentNode.insertBefore(node, region);
  }
}

// A page without a source of its own (the terminal, an error page) still
// keeps its navigation's Inbox count live: it fetches its own address, and
// when that fails it leaves the page alone instead of leaving it.
const from = src || location.pathname + location.search;

let timer = null;
function schedule() {
  clearTimeout(timer);
  timer = setTimeout(refresh, 60);
}

// What the person did inside a region that a fresh copy would undo: open
// or closed <details>, and fields changed but not sent (by id).
function keep(old) {
  const kept = { details: {}, fields: {} };
  old.querySelectorAll('details[id]').forEach((d) => { kept.details[d.id] = d.open; });
  old.querySelectorAll('input[id], textarea[id], select[id]').forEach((f) => {
    if (f.type === 'checkbox' || f.type === 'radio') {
      if (f.checked !== f.defaultChecked) kept.fields[f.id] = { checked: f.checked };
    } else if (f.tagName === 'SELECT') {
      if ([...f.options].some((o) => o.selected !== o.defaultSelected)) kept.fields[f.id] = { value: f.value };
    } else if (f.value !== f.defaultValue) {
      kept.fields[f.id] = { value: f.value };
    }
  });
  return kept;
}

function restore(node, kept) {
  for (const [id, open] of Object.entries(kept.details)) {
    const d = node.querySelector('#' + CSS.escape(id));
    if (d) d.open = open;
  }
  for (const [id, k] of Object.entries(kept.fields)) {
    const f = node.querySelector('#' + CSS.escape(id));
    if (!f) continue;
    if ('checked' in k && (f.type === 'checkbox' || f.type === 'radio')) f.checked = k.checked;
    else if ('value' in k) f.value = k.value;
  }
}

// Regions left as they were because the person was typing in them; they
// are fetched afresh once focus leaves.
let deferred = false;
let deferrals = 0;
document.addEventListener('focusout', () => {
  if (!deferred) return;
  deferred = false;
  schedule(); // runs once focus has landed: still inside the region, it waits again
});

function refresh() {
  fetch(from, { credentials: 'same-origin', headers: { Accept: 'text/html' } }).then((r) => {
    if (!src) return r.ok && !r.redirected ? r.text() : null;
    if (r.redirected || !r.ok) {
      // Signed out, or the thing on this page is gone: show what the
      // server says instead of a stale page.
      location.assign(r.redirected ? r.url : src);
      return null;
    }
    return r.text();
  }).then((html) => {
    if (html !== null) apply(html);
  }).catch(() => { /* the stream's reconnect will try again */ });
}

// apply swaps in every live region of a fresh copy of the page.
function apply(html) {
  const doc = new DOMParser().parseFromString(html, 'text/html');
  document.querySelectorAll('[data-live]').forEach((old) => {
    const fresh = doc.getElementById(old.id);
    // A menu the person opened is not a change: the fresh copy takes the
    // open state first, so a refresh swaps a region only when what it
    // says changed (and a click on an open menu's item is not swapped
    // from under it).
    if (fresh) restore(fresh, keep(old));
    const active = document.activeElement;
    const action = swapAction({
      fresh, same: fresh && fresh.innerHTML === old.innerHTML, focusInside: old.contains(active),
      focusOnField: isField(active), waiting: old.hasAttribute('data-live-deferred'),
    });
    if (action === 'keep') {
      old.removeAttribute('data-live-deferred');
      return;
    }
    if (action === 'defer') {
      // Swapping now would move the caret and drop what is being typed;
      // once waiting, it waits while focus stays in the region, so the
      // Save button the person is pressing is not swapped from under
      // the click.
      deferred = true;
      old.setAttribute('data-live-deferred', String(++deferrals)); // counts, for tests to see a refresh wait
      return;
    }
    const focused = active && old.contains(active) ? active.id : '';
    const kept = keep(old);
    const node = document.importNode(fresh, true);
    restore(node, kept);
    old.replaceWith(node);
    if (focused) {
      const again = document.getElementById(focused);
      if (again) again.focus();
    }
  });
  if (src && doc.title) document.title = doc.title;
}

// The event stream. A stream the server refused (signed out?) is asked
// for again after a fixed 5 s, the page fetch scheduled with it finding
// out what is wrong. The first stream is opened with the page's mark (where
// the person's events stood when the server began this page), so an event
// published between the render and the stream's opening is not lost: the
// stream starts with "missed" and the page refreshes once. A stream opened
// again after a break refreshes anyway.
const streamRetry = new Backoff(5000, 5000);
let broken = false;
let mark = body.getAttribute('data-live-mark');
function connect(types) {
  const es = new EventSource('/api/events' + (mark ? '?since=' + encodeURIComponent(mark) : ''));
  mark = null;
  for (const t of types) es.addEventListener(t, schedule);
  es.addEventListener('missed', schedule);
  es.onopen = () => {
    body.setAttribute('data-live-state', 'open');
    streamRetry.reset();
    if (broken) { broken = false; schedule(); }
  };
  es.onerror = () => {
    broken = true;
    body.setAttribute('data-live-state', 'reconnecting');
    if (es.readyState === EventSource.CLOSED) {
      schedule();
      setTimeout(() => connect(types), streamRetry.next());
    }
  };
}

const regions = document.querySelectorAll('[data-live]');
if (regions.length && window.EventSource) {
  connect(liveTypes([...regions].map((r) => r.getAttribute('data-live'))));
}
