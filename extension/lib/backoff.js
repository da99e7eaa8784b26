// backoff.js decides how long the worker waits before dialling the server again.
//
// Policy ("equal jitter"): the n-th retry in a row (n = 0, 1, 2, …) waits a random time in
// [cap/2, cap], where cap = min(1 s × 2^n, 30 s). Half of each wait is fixed so a flapping server
// is not hammered, and half is random so a server restart does not see every browser come back in
// the same second. The first retry therefore waits 0.5–1 s and the wait never exceeds 30 s.
// reset() after a connection has proved itself (it stayed up and answered), so one drop after a
// long healthy connection retries quickly again.

export const BASE_MS = 1000;
export const MAX_MS = 30000;

// delayFor returns the wait before retry number attempt (0-based). random returns a number in
// [0, 1); tests pass their own.
export function delayFor(attempt, random = Math.random) {
  const n = Math.max(0, Math.min(attempt, 30));
  const cap = Math.min(BASE_MS * 2 ** n, MAX_MS);
  return Math.round(cap / 2 + random() * (cap / 2));
}

// Backoff counts retries in a row.
export class Backoff {
  constructor(random = Math.random) {
    this.attempt = 0;
    this.random = random;
  }

  // next returns the wait before the next retry and counts it.
  next() {
    return delayFor(this.attempt++, this.random);
  }

  // reset starts over after a connection that worked.
  reset() {
    this.attempt = 0;
  }
}
