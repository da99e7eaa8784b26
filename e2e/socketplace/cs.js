// The content script's half (isolated world): when the page's <html> carries data-run, times its own
// WebSocket, a port round trip to the worker, and asks the worker to time its socket; the results go
// on <html data-out> for the test to read.
(async () => {
  const { roundTrips } = await import(chrome.runtime.getURL('time.js'));
  const html = document.documentElement;
  const url = html.dataset.socket, n = Number(html.dataset.n), msg = html.dataset.msg;
  const out = {};
  try {
    out.contentScriptSocketUs = await roundTrips(url + '?who=cs', n, msg);
    const port = chrome.runtime.connect();
    let next;
    port.onMessage.addListener((m) => {
      if (m && m.relayed !== undefined) return port.postMessage({ back: m.relayed }); // the call path's turn in the tab
      next(m);
    });
    const ask = (m) => new Promise((r) => { next = r; port.postMessage(m); });
    const t0 = performance.now();
    for (let i = 0; i < n; i++) await ask(msg);
    out.portUs = ((performance.now() - t0) * 1000) / n;
    out.workerSocketUs = (await ask({ socket: url + '?who=worker', n, msg })).socketUs;
    out.relayUs = (await ask({ relay: url + '?who=relay', n, msg })).relayUs;

    // A socket in an extension frame inside the tab, alone and relaying to this content script.
    const frame = document.createElement('iframe');
    let fromFrame;
    addEventListener('message', (e) => {
      if (e.source !== frame.contentWindow) return;
      if (e.data.relayed !== undefined) return frame.contentWindow.postMessage({ back: e.data.relayed }, '*');
      fromFrame(e.data);
    });
    const frameSays = () => new Promise((r) => (fromFrame = r));
    let said = frameSays();
    frame.src = chrome.runtime.getURL('frame.html');
    document.body.append(frame);
    await said;
    said = frameSays();
    frame.contentWindow.postMessage({ plain: url + '?who=frame', n, msg }, '*');
    out.frameSocketUs = (await said).plainUs;
    said = frameSays();
    frame.contentWindow.postMessage({ relay: url + '?who=framerelay', n, msg }, '*');
    out.frameRelayUs = (await said).relayUs;

    // A MessagePort between this content script and the worker, handed to the worker by the
    // extension frame (only the extension's origin can receive it): round trips on it alone
    // ("mp"), and the worker's socket relayed over it ("mprelay"), the call path's shape without
    // a runtime port. Chromium routes a runtime port's messages through the browser process; a
    // MessagePort's go between the two renderers.
    const overPort = (job, onTurn) => new Promise((resolve) => {
      const ch = new MessageChannel();
      ch.port1.onmessage = (e) => (e.data.done !== undefined ? resolve(e.data.done) : onTurn(ch.port1, e.data));
      frame.contentWindow.postMessage({ toWorker: job }, new URL(chrome.runtime.getURL('')).origin, [ch.port2]);
    });
    out.mpUs = await overPort({ echo: msg, n }, (p, m) => p.postMessage(m));
    out.mpRelayUs = await overPort({ relay: url + '?who=mprelay', n, msg }, (p, m) => p.postMessage({ back: m.relayed }));
  } catch (e) {
    out.error = String(e?.message ?? e);
  }
  html.dataset.out = JSON.stringify(out);
})();
