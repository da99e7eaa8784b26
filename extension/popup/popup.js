// popup.js: a strip for the current tab's site (its tool count and, later, Share), then the
// server's own web app in a frame. The app is framed rather than bundled because the sign-in
// cookie never reaches a chrome-extension:// origin; the frame gets it because the extension holds
// host permission for the server. Signed out, sign-in opens in a tab: sign-in providers refuse
// to be framed.

import { getServer } from '../lib/config.js';
import { ask, wireDetection } from '../lib/ui.js';

const $ = (id) => document.getElementById(id);

async function showSite() {
  const [tab] = await chrome.tabs.query({ active: true, currentWindow: true });
  let origin = '';
  try {
    origin = new URL(tab?.url ?? '').origin;
  } catch {
    // Not a web page.
  }
  $('site-name').textContent = origin && origin !== 'null' ? origin : 'No site in this tab';
  const status = await ask('detection');
  if (!status.on) {
    $('detection-row').hidden = false;
    $('tool-count').textContent = 'Detection is off';
    return;
  }
  const info = tab ? await ask('tabInfo', { tabId: tab.id }) : null;
  const n = info ? info.tools.length : 0;
  $('tool-count').textContent = n === 1 ? '1 tool' : `${n} tools`;
}

async function showApp() {
  const server = await getServer();
  for (const el of document.querySelectorAll('.server')) el.textContent = server;
  let res;
  try {
    res = await fetch(`${server}/api/auth/me`, { credentials: 'include' });
  } catch {
    $('unreachable').hidden = false;
    return;
  }
  if (res.status === 401) {
    $('signed-out').hidden = false;
    return;
  }
  $('app').src = `${server}/`;
  $('app').hidden = false;
}

$('sign-in').addEventListener('click', async () => {
  await chrome.tabs.create({ url: `${await getServer()}/` });
  window.close();
});
$('options').addEventListener('click', () => chrome.runtime.openOptionsPage());

wireDetection($('detection'), $('detection-note'));
showSite();
showApp();
