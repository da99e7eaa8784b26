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
  link,
  showApprovals,
  notices,
  notificationClicked: onNotificationClicked,
  command: onCommand,
};
