// lane.js runs in content/lane.html, the extension frame a bridge (content/bridge.js) adds to its
// tab for a moment to hand the worker one end of a MessageChannel, its lane: a content script
// cannot pass a port to the worker by extension messaging, and this frame, of the extension's
// origin, can post to the extension's worker. It passes on the first message its parent posts it
// with a port and a secret, and nothing else; the worker binds the port only with the secret it
// gave that bridge, and the bridge then removes the frame. The parent is the tab's window, which
// the page shares with the bridge: what a page posts here itself carries no secret the worker
// gave, and is refused there.
addEventListener('message', async (e) => {
  if (e.source !== parent || e.data?.type !== 'lane' || typeof e.data.secret !== 'string' || e.ports.length !== 1) return;
  const worker = (await navigator.serviceWorker.ready).active;
  worker?.postMessage({ type: 'lane', secret: e.data.secret }, [e.ports[0]]);
});
