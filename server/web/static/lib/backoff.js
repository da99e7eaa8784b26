// backoff.js is the web app's one wait between retries: the terminal page re-dialling its socket
// and the live regions asking for their event stream again. The n-th retry in a row waits
// first × 2^n, at most most; reset() after a connection that worked starts over. No jitter: a
// page says how long it waits ("retrying in 4 s"), and pages are not a herd (each is one person's).

export class Backoff {
  constructor(first, most) {
    this.first = first;
    this.most = most;
    this.wait = first;
  }

  // next returns the wait before the next retry and doubles the one after.
  next() {
    const wait = this.wait;
    this.wait = Math.min(this.wait * 2, this.most);
    return wait;
  }

  // reset starts over after a connection that worked.
  reset() {
    this.wait = this.first;
  }
}
