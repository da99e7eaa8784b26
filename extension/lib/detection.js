// detection.js owns whether the extension looks at pages at all. Detection is off by default: no
// content scripts are registered and no broad host permission is held. It is on only when the
// person turned it on (a flag in chrome.storage.local) AND the optional "<all_urls>" permission is
// held; reconcile() makes the registered scripts match that, and the worker runs it on every start
// and whenever permissions change.
//
// Both scripts are registered in ONE registerContentScripts call. Chrome runs document_start
// scripts of one registration in the order of their ids, so the bridge's id sorts first: it must
// put the nonce on <html> before the observer reads it.

export const ALL_URLS = '<all_urls>';
export const FLAG = 'detection';

// SCRIPTS are the two content scripts, bridge first.
export const SCRIPTS = Object.freeze([
  Object.freeze({
    id: 'a-bridge',
    js: ['lib/messages.js', 'content/bridge.js'],
    matches: [ALL_URLS],
    runAt: 'document_start',
    allFrames: false,
    persistAcrossSessions: true,
    world: 'ISOLATED',
  }),
  Object.freeze({
    id: 'b-observer',
    js: ['content/observer.js'],
    matches: [ALL_URLS],
    runAt: 'document_start',
    allFrames: false,
    persistAcrossSessions: true,
    world: 'MAIN',
  }),
]);

const IDS = SCRIPTS.map((s) => s.id);

// registrationMatches says whether what Chrome reports as registered is exactly SCRIPTS.
export function registrationMatches(registered) {
  if (registered.length !== SCRIPTS.length) return false;
  return SCRIPTS.every((want) => {
    const got = registered.find((r) => r.id === want.id);
    return got !== undefined &&
      JSON.stringify(got.js) === JSON.stringify(want.js) &&
      JSON.stringify(got.matches) === JSON.stringify(want.matches) &&
      got.runAt === want.runAt &&
      got.allFrames === want.allFrames &&
      (got.world ?? 'ISOLATED') === want.world &&
      got.persistAcrossSessions !== false;
  });
}

// plan says what reconcile must do: 'register', 'unregister' or 'keep'.
export function plan({ wanted, permitted, registered }) {
  const on = wanted && permitted;
  if (on) return registrationMatches(registered) ? 'keep' : 'register';
  return registered.length > 0 ? 'unregister' : 'keep';
}

// status reports whether detection is on, as the popup and options show it.
export async function status() {
  const [{ [FLAG]: wanted = false }, permitted, registered] = await Promise.all([
    chrome.storage.local.get(FLAG),
    chrome.permissions.contains({ origins: [ALL_URLS] }),
    ours(),
  ]);
  return { wanted, permitted, registered: registered.map((r) => r.id), on: wanted && permitted && registrationMatches(registered) };
}

async function ours() {
  return chrome.scripting.getRegisteredContentScripts({ ids: IDS });
}

// reconcile makes the registration match the flag and the permission. Reconciles run one at a
// time: the worker's start, a permission event and the switch each ask for one, often together
// (granting the permission fires onAdded while the switch's own turnOn runs), and two that both
// read "nothing registered" would both register — the second failing with Chrome's "Duplicate
// script ID", which the switch showed as an error and left detection off.
let running = Promise.resolve();
export function reconcile() {
  const next = running.then(reconcileNow, reconcileNow);
  running = next;
  return next;
}

async function reconcileNow() {
  const [{ [FLAG]: wanted = false }, permitted, registered] = await Promise.all([
    chrome.storage.local.get(FLAG),
    chrome.permissions.contains({ origins: [ALL_URLS] }),
    ours(),
  ]);
  const todo = plan({ wanted, permitted, registered });
  if (todo === 'keep') return;
  if (registered.length > 0) await chrome.scripting.unregisterContentScripts({ ids: registered.map((r) => r.id) });
  if (todo === 'register') await chrome.scripting.registerContentScripts(SCRIPTS.map((s) => ({ ...s })));
}

// turnOn records the person's choice; the caller has already been granted the permission
// (chrome.permissions.request needs the click's user gesture, so only a page can ask).
export async function turnOn() {
  await chrome.storage.local.set({ [FLAG]: true });
  await reconcile();
}

// turnOff unregisters the scripts and gives the broad permission back.
export async function turnOff() {
  await chrome.storage.local.set({ [FLAG]: false });
  await reconcile();
  await chrome.permissions.remove({ origins: [ALL_URLS] });
}
