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
//
// A request card that arrives by a live update is held the same way. The agent chooses when it
// asks, and the first request of an empty inbox takes the place of what was there (the "Get
// started" checklist, the empty-inbox notice), so a click aimed at that lands on its answers; a
// card the page was loaded with is not held (the person opened the page to answer it).

export const SETTLE_MS = 1000;

export class SettleGate {
  // focused: whether the window has focus now (document.hasFocus()); now: the clock (ms).
  constructor(focused, now) {
    this.since = focused ? now : null; // when focus was last gained; null while unfocused
    this.seen = new Map(); // request id → when it was first on screen, or last moved
    this.heldAt = new Map(); // request id → { at, why }: when it last moved ('moved') or arrived ('arrived')
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

  // shown notes the requests on screen now (a live swap re-renders a card: it keeps its time) and
  // returns the ids that were not on screen before.
  shown(ids, now) {
    const live = new Set(ids);
    for (const id of this.seen.keys()) if (!live.has(id)) this.seen.delete(id);
    for (const id of this.heldAt.keys()) if (!live.has(id)) this.heldAt.delete(id);
    const fresh = ids.filter((id) => !this.seen.has(id));
    for (const id of fresh) this.seen.set(id, now);
    return fresh;
  }

  // moved notes that request id's card changed place at now: it counts as new again.
  moved(id, now) {
    this.seen.set(id, now);
    this.heldAt.set(id, { at: now, why: 'moved' });
  }

  // arrived notes that request id's card appeared at now by a live update, not with the page: its
  // answers take no click until it has been on screen for SETTLE_MS.
  arrived(id, now) {
    this.seen.set(id, now);
    this.heldAt.set(id, { at: now, why: 'arrived' });
  }

  // clickable reports whether a click on request id's answers counts at now: not while its card
  // has just moved or arrived. (A page another site opened asks allows() as well.)
  clickable(id, now) {
    const h = this.heldAt.get(id);
    return !h || now - h.at >= SETTLE_MS;
  }

  // heldWhy says why request id's answers take no click at now ('moved' or 'arrived'), or null.
  heldWhy(id, now) {
    return this.clickable(id, now) ? null : this.heldAt.get(id).why;
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
