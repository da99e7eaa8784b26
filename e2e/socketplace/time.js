// roundTrips opens a WebSocket to url, sends msg n times, each after the echo of the one before,
// and returns the mean round trip in microseconds (performance.now() is coarse: the mean of many is not).
export async function roundTrips(url, n, msg) {
  const ws = new WebSocket(url);
  await new Promise((resolve, reject) => {
    ws.onopen = resolve;
    ws.onerror = () => reject(new Error(`WebSocket to ${url} failed`));
  });
  let next;
  ws.onmessage = () => next();
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    const echoed = new Promise((r) => (next = r));
    ws.send(msg);
    await echoed;
  }
  const us = ((performance.now() - t0) * 1000) / n;
  ws.close();
  return us;
}
