// timed runs n calls of one(i) with callers of them in flight at once and returns their stats
// (p50, p99 in ms, calls per second, how many failed and the last failure): a call fails when it
// throws, is an error, or its text does not carry the query q<i> it was sent. Shared by bench.mjs
// and socket.mjs. TABBRIDGE_BENCH_GAP_MS (none by default) makes each caller pause that long
// between its calls, as the Go side of TestCallBesideMCPB does.
import { performance } from "node:perf_hooks";
import { setTimeout as pause } from "node:timers/promises";

const gap = Number(process.env.TABBRIDGE_BENCH_GAP_MS ?? 0);

export async function timed(one, n, callers) {
  const lat = [];
  let failed = 0;
  let error = "";
  let next = 0;
  const worker = async () => {
    while (next < n) {
      const i = next++;
      if (gap > 0 && i >= callers) await pause(gap);
      const t0 = performance.now();
      try {
        const r = await one(i);
        if (r.isError || !JSON.stringify(r.content).includes(`q${i}`)) {
          failed++;
          error = JSON.stringify(r.content ?? r).slice(0, 300);
        }
      } catch (e) {
        failed++;
        error = String(e?.message ?? e);
      }
      lat.push(performance.now() - t0);
    }
  };
  const start = performance.now();
  await Promise.all(Array.from({ length: callers }, worker));
  const took = (performance.now() - start) / 1000;
  lat.sort((a, b) => a - b);
  const q = (p) => lat[Math.min(lat.length - 1, Math.floor(p * lat.length))];
  return { P50: q(0.5), P99: q(0.99), PerSec: lat.length / took, Failed: failed, Error: error };
}
