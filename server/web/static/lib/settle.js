// settle.js decides whether a key typed on an approval page is the person's answer. A page that
// just gained focus may be receiving keys meant for another: a hostile site asks the person to
// type (or hold) a word, and as they type it opens Tabbridge in a new window, which takes focus
// and the next keys — "a" would be "Always allow" on the first waiting request (keyjacking).
// Frame-ancestors cannot stop that, as nothing is framed. So the answer keys (Y, A, N) count only
// once the window has held focus, visible, for SETTLE_MS, and the request has been on screen as
// long; a key in the first moments does nothing. A page another site sent the browser to (the
// server marks it data-arrived="cross-site") holds clicks on its form buttons the same way: the
// site may have asked for a double-click and put the page under the second click
// (double-clickjacking).
//
// A request card that moves is new again. When a request above it leaves (answered, expired, or
// withdrawn by its agent at the moment of its choosing), the cards below slide up under the
// person's pointer, and the first card — the one the keys answer — becomes another. So a card
// whose place changed takes neither a key nor a click on its answers until it has held its new
// place for SETTLE_MS; on any page, not only one another site opened.

export const SETTLE_MS = 1000;

export class SettleGate {
  // focused: whether the window has focus now (document.hasFocus()); now: the clock (ms).
  constructor(focused, now) {
    this.since = focused ? now : null; // when focus was last gained; null while unfocused
    this.seen = new Map(); // request id → when it was first on screen, or last moved
    this.movedAt = new Map(); // request id → when it last moved
  }

  focus(now) {
    if (this.since === null) this.since = now;
  }

  blur() {
    this.since = null;
  }

  // focused reports whether the window has focus, as far as the gate knows.
  get focused() {
    return this.since !== null;
  }

  // shown notes the requests on screen now (a live swap re-renders a card: it keeps its time).
  shown(ids, now) {
    const live = new Set(ids);
    for (const id of this.seen.keys()) if (!live.has(id)) this.seen.delete(id);
    for (const id of this.movedAt.keys()) if (!live.has(id)) this.movedAt.delete(id);
    for (const id of ids) if (!this.seen.has(id)) this.seen.set(id, now);
  }

  // moved notes that request id's card changed place at now: it counts as new again.
  moved(id, now) {
    this.seen.set(id, now);
    this.movedAt.set(id, now);
  }

  // clickable reports whether a click on request id's answers counts at now: not while its card
  // has just moved. (A page another site opened asks allows() as well.)
  clickable(id, now) {
    return !this.movedAt.has(id) || now - this.movedAt.get(id) >= SETTLE_MS;
  }

  // settled reports whether the window has held focus for SETTLE_MS at now.
  settled(now) {
    return this.since !== null && now - this.since >= SETTLE_MS;
  }

  // allows reports whether an answer for request id counts at now.
  allows(id, now) {
    const seen = this.seen.has(id) ? this.seen.get(id) : now;
    return this.settled(now) && now - seen >= SETTLE_MS;
  }
}
