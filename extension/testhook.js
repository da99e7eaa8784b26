// testhook.js is the tests' way into the service worker, and no part of the shipped extension: the
// end-to-end harness (e2e/testbuild.go) loads a copy of the extension whose manifest starts the
// worker here, scripts/release leaves it out of the zip, and a test checks that it does
// (cmd/tabbridge/release_test.go). It imports the real worker, so every listener is registered
// exactly as in the shipped one, and sits beside sw.js so relative addresses (a notification's
// icon) resolve as they do there; then it exposes self.__tabbridgeTest to drive calls before the
// server socket exists. That is a global of the worker's own scope: no page, content script or
// other extension can reach it.
import { ready, pages, link, showApprovals, notices, onNotificationClicked, onCommand } from './sw.js';
import * as detection from './lib/detection.js';

// traffic counts, per document, the ports its bridge opened and the messages it sent on them (by
// type), and the tools.announce frames sent to the server for it: how much a page can make the
// extension carry. The real methods are wrapped on their instances, which every caller reaches
// them through.
const traffic = {};
function count(documentId, key) {
  const t = (traffic[documentId] ??= {});
  t[key] = (t[key] ?? 0) + 1;
}
const attach = pages.attach.bind(pages);
pages.attach = (port, ready) => {
  count(port.sender?.documentId, 'ports');
  attach(port, ready);
};
const onMessage = pages.onMessage.bind(pages);
pages.onMessage = (port, documentId, origin, tabId, msg) => {
  count(documentId, String(msg?.type));
  onMessage(port, documentId, origin, tabId, msg);
};
const send = link.send.bind(link);
link.send = (msg) => {
  const sent = send(msg);
  if (sent && msg?.type === 'tools.announce') count(msg.documentId, 'tools.announce');
  return sent;
};

// The worker's reads of a tab (chrome.scripting.executeScript: the page a form went to) can be held
// until the test releases them, as when the worker is slow to get to one: the read then runs in
// whatever the tab shows by then.
let held = null; // {waiting, open, released} while reads are held
const executeScript = chrome.scripting.executeScript;
chrome.scripting.executeScript = (...args) => {
  const run = () => Reflect.apply(executeScript, chrome.scripting, args);
  if (held === null) return run();
  held.waiting++;
  return held.released.then(run);
};

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
  traffic: (documentId) => ({ ...traffic[documentId] }),
  detection: () => detection.status(),
  holdReads() {
    let open;
    const released = new Promise((resolve) => (open = resolve));
    held = { waiting: 0, open, released };
  },
  heldReads: () => held?.waiting ?? 0,
  releaseReads() {
    held?.open();
    held = null;
  },
  link,
  showApprovals,
  notices,
  notificationClicked: onNotificationClicked,
  command: onCommand,
};
