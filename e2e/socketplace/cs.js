// The content script's half (isolated world): when the page's <html> carries data-run, times its own
// WebSocket, a port round trip to the worker, and asks the worker to time its socket; the results go
// on <html data-out> for the test to read.
(async () => {
  const { roundTrips } = await import(chrome.runtime.getURL('time.js'));
  const html = document.documentElement;
  const url = html.dataset.socket, n = Number(html.dataset.n), msg = html.dataset.msg;
  const out = {};
  try {
    out.contentScriptSocketUs = await roundTrips(url, n, msg);
    const port = chrome.runtime.connect();
    let next;
    port.onMessage.addListener((m) => next(m));
    const ask = (m) => new Promise((r) => { next = r; port.postMessage(m); });
    const t0 = performance.now();
    for (let i = 0; i < n; i++) await ask(msg);
    out.portUs = ((performance.now() - t0) * 1000) / n;
    out.workerSocketUs = (await ask({ socket: url, n, msg })).socketUs;
  } catch (e) {
    out.error = String(e?.message ?? e);
  }
  html.dataset.out = JSON.stringify(out);
})();
