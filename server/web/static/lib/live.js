// live.js holds what the live regions decide without touching a page, so Node's tests run it
// (server/web/test): which event types a page listens for, which controls are fields being typed
// in, what a fresh copy of a region does to the old one, and the countdown to a request's expiry.

// liveTypes is the set of event types the regions' data-live attributes name.
export function liveTypes(attrs) {
  const types = new Set();
  for (const a of attrs) for (const t of (a || '').split(/\s+/)) if (t) types.add(t);
  return types;
}

// isField says whether el is a form field the person types or chooses in: its region waits
// until they leave it.
export function isField(el) {
  if (!el) return false;
  if (el.tagName === 'TEXTAREA' || el.tagName === 'SELECT') return true;
  return el.tagName === 'INPUT' && !/^(hidden|submit|button|reset|image)$/.test(el.type);
}

// swapAction is what a fresh copy does to a region: 'keep' when there is none or it says the same,
// 'defer' when swapping would move the caret (focus on a field inside) or the region already waits
// and focus is still inside (so the button being pressed is not swapped from under the click),
// else 'swap'.
export function swapAction({ fresh, same, focusInside, focusOnField, waiting }) {
  if (!fresh || same) return 'keep';
  if (focusInside && (focusOnField || waiting)) return 'defer';
  return 'swap';
}

// countdown is what a request's expiry reads at now (ms): "expires in 4:59", soon under a minute;
// "expired" from zero; null when expires is not a date.
export function countdown(expires, now) {
  const left = Math.round((Date.parse(expires) - now) / 1000);
  if (isNaN(left)) return null;
  if (left <= 0) return { text: 'expired', soon: true };
  const m = Math.floor(left / 60);
  const sec = left % 60;
  return { text: `expires in ${m}:${sec < 10 ? '0' : ''}${sec}`, soon: left < 60 };
}
