// settle.js decides whether a key typed on an approval page is the person's answer. A page that
// just gained focus may be receiving keys meant for another: a hostile site asks the person to
// type (or hold) a word, and as they type it opens Tabbridge in a new window, which takes focus
// and the next keys — "a" would be "Always allow" on the first waiting request (keyjacking).
// Frame-ancestors cannot stop that, as nothing is framed. So the answer keys (Y, A, N) count only
// once the window has held focus, visible, for SETTLE_MS, and the request has been on screen as
// long; a key in the first moments does nothing. A page another site sent the browser to (the
// server marks it data-arrived="cross-site") holds clicks on its form buttons the same way: the
// site may have asked for a double-click and put the page under the second click
// (double-clickjacking). Elsewhere clicks are unaffected.

export const SETTLE_MS = 1000;

export class SettleGate {
  // focused: whether the window has focus now (document.hasFocus()); now: the clock (ms).
  constructor(focused, now) {
    this.since = focused ? now : null; // when focus was last gained; null while unfocused
    this.seen = new Map(); // request id → when it was first on screen
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
    for (const id of ids) if (!this.seen.has(id)) this.seen.set(id, now);
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
