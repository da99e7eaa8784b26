// sw.js is the extension's service worker. Chrome stops it whenever it is idle, so every listener
// is registered synchronously here at top level, state lives in chrome.storage.session, and each
// handler waits for the one init promise before it touches state.
//
// It owns: detection (content scripts and the broad permission, re-checked on every start), the
// bridges' ports and calls into pages (lib/pages.js), the one socket to the server
// (lib/link.js), tab use, the approvals badge and notifications, the popup's questions and the
// keyboard command.

import { Pages } from './lib/pages.js';
import { ServerLink } from './lib/link.js';
import * as detection from './lib/detection.js';
import { getServer } from './lib/config.js';
import { onInstalled } from './lib/welcome.js';
import { ApprovalNotices, MANY_ID } from './lib/notify.js';

const ALARM = 'tabbridge-link';
const pages = new Pages();
const link = new ServerLink({ pages, onApprovals: showApprovals, onApprovalsUnknown: clearBadge });
pages.onChange = () => link.sync();
pages.onUse = (tabId) => link.used(tabId);
const ready = init();

async function init() {
  await Promise.all([pages.load(), link.load()]);
  try {
    await detection.reconcile();
  } catch (e) {
    console.warn('tabbridge: reconcile detection', e);
  }
  // Restored documents lost their ports with the old worker: ask them to reconnect and forget the
  // gone ones, before the socket tells the server which sites are open. A tab that does not answer
  // (frozen, say) does not hold up the start for more than two seconds.
  let timer;
  await Promise.race([pages.recheck().catch((e) => console.warn('tabbridge: recheck documents', e)), new Promise((r) => (timer = setTimeout(r, 2000)))]);
  clearTimeout(timer);
  // The alarm wakes a stopped worker so a wanted socket is dialled again.
  chrome.alarms.create(ALARM, { periodInMinutes: 0.5 }).catch(() => {});
  link.start();
}

// The server socket: kept up by the alarm, redialled when the server address changes.
chrome.alarms.onAlarm.addListener((a) => {
  if (a.name === ALARM) ready.then(() => link.ensure());
});
chrome.storage.onChanged.addListener((changes, area) => {
  if (area === 'local' && changes.server) ready.then(() => link.kick({ forget: true }));
});

// showApprovals puts the number of waiting requests on the icon and keeps the one notification
// of waiting requests (lib/notify.js: a burst collapses into "12 requests waiting").
const notices = new ApprovalNotices({ notifications: chrome.notifications });
function showApprovals(m) {
  chrome.action.setBadgeText({ text: m.pending > 0 ? String(m.pending) : '' }).catch(() => {});
  return notices.show(m);
}

// clearBadge takes the count off the icon when it is no longer known (another server, signed out).
function clearBadge() {
  chrome.action.setBadgeText({ text: '' }).catch(() => {});
}

// A click on a request's notification opens the inbox at that request; on the collapsed one, the inbox.
function onNotificationClicked(id) {
  if (id === MANY_ID) return ready.then(() => openApp('/')).then(() => chrome.notifications.clear(id));
  if (!id.startsWith('approval-')) return Promise.resolve();
  const requestId = id.slice('approval-'.length);
  return ready.then(() => openApp(`/#req-${encodeURIComponent(requestId)}`)).then(() => chrome.notifications.clear(id));
}
chrome.notifications.onClicked.addListener(onNotificationClicked);

// Bridges connect from pages.
chrome.runtime.onConnect.addListener((port) => pages.attach(port, ready));

// Tab use decides which tab of a site answers.
chrome.tabs.onActivated.addListener(({ tabId }) => {
  const at = Date.now();
  ready.then(() => pages.tabUsed(tabId, at));
});
chrome.tabs.onRemoved.addListener((tabId) => ready.then(() => pages.tabClosed(tabId)));
chrome.windows.onFocusChanged.addListener((windowId) => {
  if (windowId === chrome.windows.WINDOW_ID_NONE) return;
  const at = Date.now(); // the focus happened now; the query below may answer after a newer activation
  ready.then(async () => {
    const [tab] = await chrome.tabs.query({ active: true, windowId });
    if (tab) pages.tabUsed(tab.id, at);
  });
});

// The permission can also be removed in chrome://extensions: detection follows it.
chrome.permissions.onAdded.addListener(() => ready.then(detection.reconcile));
chrome.permissions.onRemoved.addListener(() => ready.then(detection.reconcile));
chrome.runtime.onInstalled.addListener((details) => {
  onInstalled(details, (o) => chrome.tabs.create(o), (p) => chrome.runtime.getURL(p)).catch(() => {});
  return ready;
});
chrome.runtime.onStartup.addListener(() => ready);

// Alt+Shift+F opens the app full-size (Alt+Shift+A opens the popup by itself).
function onCommand(command) {
  return command === 'open-full' ? ready.then(() => openApp()) : Promise.resolve();
}
chrome.commands.onCommand.addListener(onCommand);

async function openApp(path = '/') {
  await chrome.tabs.create({ url: `${await getServer()}${path}` });
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
  tabInfo: async (m) => {
    if (!Number.isInteger(m.tabId)) return null;
    const tab = await chrome.tabs.get(m.tabId).catch(() => null);
    return tab ? pages.look(m.tabId, tab.url, (await detection.status()).on) : null;
  },
  openApp: () => openApp().then(() => true),
  // The popup shared a site (or the person signed in): connect now, the welcome says what is shared.
  connect: () => {
    link.kick();
    return link.status();
  },
  wake: () => {
    link.wake();
    return link.status();
  },
  linkStatus: () => link.status(),
};

chrome.runtime.onMessage.addListener((msg, sender, reply) => {
  if (!fromOwnPage(sender) || !msg || !Object.hasOwn(handlers, msg.type)) return false;
  ready
    .then(() => handlers[msg.type](msg))
    .then((value) => reply({ ok: true, value }), (e) => reply({ ok: false, error: String(e?.message ?? e) }));
  return true;
});

// What the end-to-end tests reach through testhook.js, which only their build of the extension
// starts (the shipped worker is this module, and nothing can import it).
export { ready, pages, link, showApprovals, notices, onNotificationClicked, onCommand };
