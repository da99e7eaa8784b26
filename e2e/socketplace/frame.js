// The extension frame's half of e2e/socketplace_bench_test.go. Asked by its parent (the content
// script), it times its own socket ("plain"), or relays each socket message to the parent with
// postMessage and sends back what the parent returns ("relay"), as MCP-B's frame does with its page.
import { roundTrips } from './time.js';

addEventListener('message', async (e) => {
  if (e.source !== parent) return;
  const m = e.data;
  if (m.toWorker) { // a MessagePort from the content script, for the worker
    (await navigator.serviceWorker.ready).active.postMessage(m.toWorker, [e.ports[0]]);
    return;
  }
  if (m.plain) {
    parent.postMessage({ plainUs: await roundTrips(m.plain, m.n, m.msg) }, '*');
    return;
  }
  if (m.relay) {
    const ws = new WebSocket(m.relay);
    await new Promise((resolve) => (ws.onopen = resolve));
    let left = m.n;
    const t0 = performance.now();
    await new Promise((resolve) => {
      ws.onmessage = (ev) => parent.postMessage({ relayed: ev.data }, '*');
      addEventListener('message', (ev) => {
        if (ev.source !== parent || ev.data.back === undefined) return;
        if (--left === 0) resolve();
        else ws.send(ev.data.back);
      });
      ws.send(m.msg);
    });
    const us = ((performance.now() - t0) * 1000) / m.n;
    ws.close();
    parent.postMessage({ relayUs: us }, '*');
  }
});
parent.postMessage({ ready: true }, '*');
