// The worker's half of e2e/socketplace_bench_test.go: echoes port messages, and on request times
// round trips on a WebSocket of its own (as the extension's socket to the server is).
import { roundTrips } from './time.js';

chrome.runtime.onConnect.addListener((port) => port.onMessage.addListener(async (m) => {
  if (m && m.back !== undefined) return; // a relayed message's way back, taken by the relay below
  if (m && m.relay) { // the call path: each socket message goes to the tab over the port and back
    const ws = new WebSocket(m.relay);
    await new Promise((resolve) => (ws.onopen = resolve));
    let left = m.n;
    const t0 = performance.now();
    const done = new Promise((resolve) => {
      ws.onmessage = (e) => port.postMessage({ relayed: e.data });
      port.onMessage.addListener((r) => {
        if (r && r.back !== undefined) {
          if (--left === 0) resolve();
          else ws.send(r.back);
        }
      });
    });
    ws.send(m.msg);
    await done;
    const us = ((performance.now() - t0) * 1000) / m.n;
    ws.close();
    port.postMessage({ relayUs: us });
    return;
  }
  if (m && m.socket) {
    port.postMessage({ socketUs: await roundTrips(m.socket, m.n, m.msg) });
    return;
  }
  port.postMessage(m);
}));

// A MessagePort from the content script (through the extension frame): echo n messages and say
// how long they took from here, or relay each message of a socket of its own over it and back.
addEventListener('message', async (e) => {
  const p = e.ports[0], m = e.data;
  if (m.echo !== undefined) {
    let left = m.n;
    const t0 = performance.now();
    await new Promise((resolve) => {
      p.onmessage = () => (--left === 0 ? resolve() : p.postMessage(m.echo));
      p.postMessage(m.echo);
    });
    p.postMessage({ done: ((performance.now() - t0) * 1000) / m.n });
    return;
  }
  const ws = new WebSocket(m.relay);
  await new Promise((resolve) => (ws.onopen = resolve));
  let left = m.n;
  const t0 = performance.now();
  await new Promise((resolve) => {
    ws.onmessage = (ev) => p.postMessage({ relayed: ev.data });
    p.onmessage = (ev) => (--left === 0 ? resolve() : ws.send(ev.data.back));
    ws.send(m.msg);
  });
  const us = ((performance.now() - t0) * 1000) / m.n;
  ws.close();
  p.postMessage({ done: us });
});
