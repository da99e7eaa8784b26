// The worker's half of e2e/socketplace_bench_test.go: echoes port messages, and on request times
// round trips on a WebSocket of its own (as the extension's socket to the server is).
import { roundTrips } from './time.js';

chrome.runtime.onConnect.addListener((port) => port.onMessage.addListener(async (m) => {
  if (m && m.socket) {
    port.postMessage({ socketUs: await roundTrips(m.socket, m.n, m.msg) });
    return;
  }
  port.postMessage(m);
}));
