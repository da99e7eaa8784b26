// popup.js: a strip for a tab's site (its tool count, and Share with a workspace or Stop sharing),
// then the server's own web app in a frame. The app is framed rather than bundled because the
// sign-in cookie never reaches a chrome-extension:// origin; the frame gets it because the
// extension holds host permission for the server. Signed out, sign-in opens in a tab: sign-in
// providers refuse to be framed.
//
// The strip is about the current window's active tab, or the tab named by ?tab=<id> (the same
// page opened in a tab, as the end-to-end tests do). Sharing talks to the server's JSON API with
// the cookie (lib/api.js authed: an expired access token is refreshed once, and only a sign-in
// that is really over shows the signed-out view); the extension's Origin passes the CSRF check.
// After a share the worker is told to connect: its socket is open only while some site is shared.

import { getServer, hostPattern } from '../lib/config.js';
import { authed, errorOf, SignedOutError } from '../lib/api.js';
import { ask, wireDetection } from '../lib/ui.js';
import { describeTab, originOf as originOfURL } from '../lib/strip.js';

const $ = (id) => document.getElementById(id);

async function theTab() {
  const asked = Number(new URLSearchParams(location.search).get('tab'));
  if (Number.isInteger(asked) && asked > 0) return chrome.tabs.get(asked).catch(() => null);
  const [tab] = await chrome.tabs.query({ active: true, currentWindow: true });
  return tab ?? null;
}

function originOf(tab) {
  return originOfURL(tab?.url);
}

const tabReady = theTab();
// The server's address, known before any click: permissions.request must be called in the
// click's gesture, before any await.
let serverNow = '';
getServer().then((s) => (serverNow = s));

// showSite fills the strip from lib/strip.js: the site, its tools by name (before Share), or in
// words why there are none. The detection switch stays in the strip whatever the state.
async function showSite() {
  const tab = await tabReady;
  const status = await ask('detection');
  const info = tab && status.on && originOf(tab) ? await ask('tabInfo', { tabId: tab.id }) : null;
  const d = describeTab(tab?.url, info, status.on);
  $('site-name').textContent = d.site;
  $('tool-count').textContent = d.count;
  $('tool-names').textContent = d.tools.join(', ');
  $('site-detail').title = d.tools.join(', ');
  if (d.countN === null) delete $('tool-count').dataset.count;
  else $('tool-count').dataset.count = String(d.countN);
  $('reload').hidden = !d.reload;
}

// note shows a line under the strip: what went wrong (it stays until the next one, or until a
// share or stop-sharing succeeds).
function note(text) {
  $('share-note').textContent = text;
  $('share-note').hidden = text === '';
}

// label says, inside the share box, what the strip knows about the site's sharing.
function label(text) {
  $('share-label').textContent = text;
  $('share-label').title = text;
  $('share-label').hidden = text === '';
}

// showSharing shows Share (with the person's workspaces) or Stop sharing for the tab's site. The
// controls change only once every answer is in, and then all at once, with no await between
// hiding a control and showing its replacement: a refresh starts on the click that brings focus
// back to the popup (or on the frame loading), and a button hidden for even one frame under a
// click swallows it. A run that finishes after a newer one started changes nothing: its answers
// may predate the newer run's (a Stop sharing clicked meanwhile).
let sharingGeneration = 0;
async function showSharing(server) {
  const generation = ++sharingGeneration;
  const origin = originOf(await tabReady);
  const box = $('share-box');
  if (!origin) {
    box.dataset.state = 'none';
    return;
  }
  const [sitesRes, wsRes] = await Promise.all([authed(server, 'GET', '/api/sites'), authed(server, 'GET', '/api/workspaces')]);
  const failure = !sitesRes.ok || !wsRes.ok ? (await errorOf(sitesRes.ok ? wsRes : sitesRes)).message : null;
  const { sites } = failure === null ? await sitesRes.json() : { sites: [] };
  const { workspaces } = failure === null ? await wsRes.json() : { workspaces: [] };
  if (generation !== sharingGeneration) return;
  // From here on, no await: the strip changes in one step. What the strip learns is said inside
  // the share box (shown only once its state is known), not in a line above the app: a line
  // appearing there would push the framed app down under the person's pointer.
  $('share').disabled = true;
  $('unshare').hidden = true;
  $('workspace').hidden = true;
  label('');
  if (failure !== null) {
    note(failure);
    box.dataset.state = 'error';
    return;
  }
  const shared = sites.find((s) => s.origin === origin);
  if (shared) {
    $('unshare').hidden = false;
    $('unshare').dataset.siteId = shared.id;
    $('share').hidden = true;
    label(`Shared with ${shared.workspaceName}`);
    box.dataset.state = 'shared';
    return;
  }
  $('share').hidden = false;
  const select = $('workspace');
  const chosen = select.value; // kept across a refresh of the strip
  select.replaceChildren(...workspaces.map((w) => new Option(w.name, w.id)));
  if (workspaces.some((w) => w.id === chosen)) select.value = chosen;
  if (workspaces.length === 0) {
    label('Create a workspace below to share');
    box.dataset.state = 'no-workspace';
    return;
  }
  select.hidden = false;
  $('share').disabled = false;
  box.dataset.state = 'unshared';
}

// refreshSharing runs showSharing again, one run at a time: a request for a run while one is on
// its way makes one more run after it. Not while signed out or mid-click (the click refreshes).
let sharingRun = null;
let sharingAgain = false;
let clicking = false;
function refreshSharing(server) {
  if (sharingRun) {
    sharingAgain = true;
    return;
  }
  if (clicking || $('share-box').dataset.state === 'signed-out') return;
  sharingRun = showSharing(server).catch(failed).finally(() => {
    sharingRun = null;
    if (sharingAgain) {
      sharingAgain = false;
      refreshSharing(server);
    }
  });
}

async function share() {
  const server = await getServer();
  const origin = originOf(await tabReady);
  $('share').disabled = true;
  const res = await authed(server, 'POST', '/api/sites', { origin, workspaceId: $('workspace').value });
  if (!res.ok) {
    note(`Not shared: ${(await errorOf(res)).message}`);
    $('share').disabled = false;
    return;
  }
  note('');
  await ask('connect');
  await showSharing(server);
}

async function unshare() {
  const server = await getServer();
  const res = await authed(server, 'DELETE', `/api/sites/${encodeURIComponent($('unshare').dataset.siteId)}`);
  if (!res.ok && res.status !== 404) {
    note(`Still shared: ${(await errorOf(res)).message}`);
    return;
  }
  note('');
  await showSharing(server);
}

// showSignedOut offers sign-in in place of the app: the person's sign-in is over (not merely its
// access token, which authed refreshes).
function showSignedOut() {
  $('app').hidden = true;
  $('signed-out').hidden = false;
  $('share-box').dataset.state = 'signed-out';
  $('share').disabled = true;
  note('');
}

// failed shows what went wrong with a click or a refresh of the strip.
function failed(e) {
  if (e instanceof SignedOutError) showSignedOut();
  else {
    note(e.message);
    $('share-box').dataset.state ||= 'error';
  }
}

async function showApp() {
  const server = await getServer();
  for (const el of document.querySelectorAll('.server')) el.textContent = server;
  // Without host permission for the server the cookie is not sent (and the fetch fails): say so
  // and ask for it in a click, rather than showing the server as down.
  if (!(await chrome.permissions.contains({ origins: [hostPattern(server)] }))) {
    $('no-access').hidden = false;
    $('share-box').dataset.state = 'no-access';
    return;
  }
  try {
    await authed(server, 'GET', '/api/auth/me');
  } catch (e) {
    if (e instanceof SignedOutError) showSignedOut();
    else {
      $('unreachable').hidden = false;
      $('share-box').dataset.state = 'unreachable';
    }
    return;
  }
  $('app').src = `${server}/`;
  $('app').hidden = false;
  // A workspace created (or a site shared) in the framed app changes what the strip offers: look
  // again whenever the frame loads a page and whenever the popup comes back into view.
  $('app').addEventListener('load', () => refreshSharing(server));
  window.addEventListener('focus', () => refreshSharing(server));
  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'visible') refreshSharing(server);
  });
  ask('wake').catch(() => {}); // signed in: a worker that found the person signed out tries again
  refreshSharing(server);
}

// clicked runs a click's work, with no refresh of the strip starting meanwhile.
function clicked(work) {
  clicking = true;
  work().catch(failed).finally(() => (clicking = false));
}
$('share').addEventListener('click', () => clicked(share));
$('unshare').addEventListener('click', () => clicked(unshare));
$('sign-in').addEventListener('click', async () => {
  await chrome.tabs.create({ url: `${await getServer()}/signin` });
  window.close();
});
$('options').addEventListener('click', () => chrome.runtime.openOptionsPage());
$('grant').addEventListener('click', () => {
  chrome.permissions.request({ origins: [hostPattern(serverNow)] }).then((granted) => {
    if (granted) location.reload();
    else note(`Without access to ${serverNow} the popup cannot show your account.`);
  }, (e) => note(e.message));
});

$('reload').addEventListener('click', async () => {
  const tab = await tabReady;
  $('reload').hidden = true;
  $('tool-count').textContent = 'Reloading…';
  $('tool-names').textContent = '';
  // Count again once the page has loaded (its bridge announces as the page registers tools).
  const loaded = (tabId, change) => {
    if (tabId !== tab.id || change.status !== 'complete') return;
    chrome.tabs.onUpdated.removeListener(loaded);
    showSite();
  };
  chrome.tabs.onUpdated.addListener(loaded);
  chrome.tabs.reload(tab.id).catch((e) => {
    chrome.tabs.onUpdated.removeListener(loaded);
    note(`Could not reload the tab: ${e.message}`);
    showSite();
  });
});
// Turning detection on (or off) changes what the strip can say about the tab.
wireDetection($('detection'), $('detection-note'), () => showSite());
showSite();
showApp().catch(failed);
