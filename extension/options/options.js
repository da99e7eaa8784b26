// options.js: the server address (its host permission asked for on save, the previous one's
// given back), whether that server answers and who is signed in to it, and the detection switch.
// Opened by the worker on install with ?welcome=1: then it greets the person and asks for the
// address instead of showing the default as if it had been chosen.

import { getSavedServer, setServer, parseServer, hostPattern } from '../lib/config.js';
import { wireDetection } from '../lib/ui.js';
import { serverStatus } from '../lib/status.js';

const $ = (id) => document.getElementById(id);
const form = $('server-form');
const input = $('server');
const note = $('server-note');
const welcome = new URLSearchParams(location.search).has('welcome');

// showStatus tests the saved server and says what it found.
async function showStatus() {
  const server = await getSavedServer();
  const el = $('server-status');
  el.dataset.state = 'checking';
  el.textContent = server ? `Checking ${server}…` : '';
  const hasAccess = server ? await chrome.permissions.contains({ origins: [hostPattern(server)] }) : false;
  const s = await serverStatus(server, { hasAccess });
  el.dataset.state = s.state;
  el.textContent = s.text;
  $('open-app').hidden = !server;
  if (server) $('open-app').href = `${server}/`;
}

// The page shows once it knows whether to greet (the welcome card sits above everything): a card
// appearing after the first paint would push down the controls a person may be aiming at.
getSavedServer().catch(() => '').then((s) => {
  input.value = s;
  $('welcome').hidden = !(welcome || !s);
  document.body.hidden = false;
  if (!s) input.focus();
  showStatus();
});

form.addEventListener('submit', (ev) => {
  ev.preventDefault();
  let origin;
  try {
    origin = parseServer(input.value);
  } catch (e) {
    note.textContent = e.message;
    return;
  }
  // Asked at once, inside the click's user gesture.
  chrome.permissions.request({ origins: [hostPattern(origin)] }).then(async (granted) => {
    if (!granted) {
      note.textContent = `Not saved: Tabbridge needs access to ${origin} to show the app signed in.`;
      return;
    }
    const previous = await getSavedServer();
    await setServer(origin);
    if (previous && previous !== origin) await chrome.permissions.remove({ origins: [hostPattern(previous)] }).catch(() => {});
    input.value = origin;
    note.textContent = `Saved. The popup now shows ${origin}.`;
    showStatus();
  }, (e) => (note.textContent = e.message));
});

$('test').addEventListener('click', () => showStatus());
wireDetection($('detection'), $('detection-note'));
