// options.js: the server address (its host permission asked for on save, the previous one's
// given back) and the detection switch.

import { getServer, setServer, parseServer, hostPattern } from '../lib/config.js';
import { wireDetection } from '../lib/ui.js';

const form = document.getElementById('server-form');
const input = document.getElementById('server');
const note = document.getElementById('server-note');

getServer().then((s) => (input.value = s));

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
    const previous = await getServer();
    await setServer(origin);
    if (previous !== origin) await chrome.permissions.remove({ origins: [hostPattern(previous)] }).catch(() => {});
    input.value = origin;
    note.textContent = `Saved. The popup now shows ${origin}.`;
  }, (e) => (note.textContent = e.message));
});

wireDetection(document.getElementById('detection'), document.getElementById('detection-note'));
