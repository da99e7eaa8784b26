// sw.js is the extension's service worker. Chrome stops it whenever it is idle, so every listener
// is registered synchronously here at top level, state lives in chrome.storage.session, and each
// handler waits for the one init promise before it touches state.
//
// Now: detection (content scripts and the broad permission, re-checked on every start), the
// bridges' ports and calls into pages (lib/pages.js), tab use, the popup's questions and the
// keyboard command. The server socket comes with the server's extension protocol.

import { Pages } from './lib/pages.js';
import * as detection from './lib/detection.js';
import { getServer } from './lib/config.js';

const pages = new Pages();
const ready = init();

async function init() {
  await pages.load();
  try {
    await detection.reconcile();
  } catch (e) {
    console.warn('tabbridge: reconcile detection', e);
  }
}

// Bridges connect from pages.
chrome.runtime.onConnect.addListener((port) => pages.attach(port, ready));

// Tab use decides which tab of a site answers.
chrome.tabs.onActivated.addListener(({ tabId }) => ready.then(() => pages.tabUsed(tabId)));
chrome.tabs.onRemoved.addListener((tabId) => ready.then(() => pages.tabClosed(tabId)));
chrome.windows.onFocusChanged.addListener((windowId) => {
  if (windowId === chrome.windows.WINDOW_ID_NONE) return;
  ready.then(async () => {
    const [tab] = await chrome.tabs.query({ active: true, windowId });
    if (tab) pages.tabUsed(tab.id);
  });
});

// The permission can also be removed in chrome://extensions: detection follows it.
chrome.permissions.onAdded.addListener(() => ready.then(detection.reconcile));
chrome.permissions.onRemoved.addListener(() => ready.then(detection.reconcile));
chrome.runtime.onInstalled.addListener(() => ready);
chrome.runtime.onStartup.addListener(() => ready);

chrome.commands.onCommand.addListener((command) => {
  if (command === 'open-full') ready.then(openApp);
});

async function openApp() {
  await chrome.tabs.create({ url: `${await getServer()}/` });
}

// Only the extension's own pages (popup, options) may ask these; content scripts talk through
// their port, and their sender.url is the page's.
function fromOwnPage(sender) {
  return sender.id === chrome.runtime.id && typeof sender.url === 'string' && sender.url.startsWith(chrome.runtime.getURL(''));
}

const handlers = {
  detection: () => detection.status(),
  setDetection: async (m) => {
    if (m.on === true) await detection.turnOn();
    else await detection.turnOff();
    return detection.status();
  },
  tabInfo: (m) => (Number.isInteger(m.tabId) ? pages.tabInfo(m.tabId) : null),
  openApp: () => openApp().then(() => true),
};

chrome.runtime.onMessage.addListener((msg, sender, reply) => {
  if (!fromOwnPage(sender) || !msg || !Object.hasOwn(handlers, msg.type)) return false;
  ready
    .then(() => handlers[msg.type](msg))
    .then((value) => reply({ ok: true, value }), (e) => reply({ ok: false, error: String(e?.message ?? e) }));
  return true;
});

// __tabbridgeTest lets the end-to-end tests drive calls before the server socket exists. It is a
// global of the worker's own scope: no page, content script or other extension can reach it.
const testCalls = new Map();
self.__tabbridgeTest = {
  ready: () => ready,
  pages,
  start(origin, tool, args, timeoutMs) {
    const callId = crypto.randomUUID();
    testCalls.set(callId, ready.then(() => pages.call({ callId, origin, tool, args, timeoutMs })));
    return callId;
  },
  outcome: (callId) => testCalls.get(callId),
  call(origin, tool, args, timeoutMs) {
    return this.outcome(this.start(origin, tool, args, timeoutMs));
  },
  cancel: (callId) => pages.cancel(callId),
  documents: () => Object.values(pages.rec.docs),
  detection: () => detection.status(),
};
