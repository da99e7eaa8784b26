// Times MCP-B's browser half from the process that holds the page's socket: MCP-B's own
// RelayBridgeServer (the WebSocket server inside its relay) calls the page's tool with
// invokeTool — its WebSocket to the page's hidden iframe, postMessage to the page, the page's
// runtime, and back — with no MCP client or stdio in front. Tabbridge's counterpart is the
// server's bridge hub calling the extension (TestCallBesideMCPB times it in Go).
//   node socket.mjs <port> <persist dir>
// It prints "listening", then "ready" once the page's tool is listed, then for every line
// "<calls> <callers>" on its standard input one JSON line of stats.
import { RelayBridgeServer } from "@mcp-b/webmcp-local-relay";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { createInterface } from "node:readline";

const [port, dir] = process.argv.slice(2);
const bridge = new RelayBridgeServer({ host: "127.0.0.1", port: Number(port), portExplicitlySet: true, persistPath: join(dir, "relay-port.json") });
await bridge.start();
console.log("listening");
const until = Date.now() + 30000;
while (!bridge.registry.listTools().some((t) => t.name === "search")) {
  if (Date.now() > until) throw new Error("the page's search tool never reached MCP-B's bridge server");
  await new Promise((r) => setTimeout(r, 20));
}
console.log("ready");

async function timed(n, callers) {
  const lat = [];
  let failed = 0;
  let error = "";
  let next = 0;
  const worker = async () => {
    while (next < n) {
      const i = next++;
      const t0 = performance.now();
      try {
        const r = await bridge.invokeTool("search", { q: `q${i}` });
        if (r.isError || !JSON.stringify(r.content).includes(`q${i}`)) {
          failed++;
          error = JSON.stringify(r).slice(0, 300);
        }
      } catch (e) {
        failed++;
        error = String(e?.message ?? e);
      }
      lat.push(performance.now() - t0);
    }
  };
  const start = performance.now();
  const cpu = process.cpuUsage();
  await Promise.all(Array.from({ length: callers }, worker));
  const took = (performance.now() - start) / 1000;
  const used = process.cpuUsage(cpu);
  lat.sort((a, b) => a - b);
  const q = (p) => lat[Math.min(lat.length - 1, Math.floor(p * lat.length))];
  return { P50: q(0.5), P99: q(0.99), PerSec: lat.length / took, Failed: failed, Error: error, SocketCPU: (used.user + used.system) / n };
}

for await (const line of createInterface({ input: process.stdin })) {
  const [n, callers] = line.trim().split(/\s+/).map(Number);
  console.log(JSON.stringify(await timed(n, callers)));
}
await bridge.stop();
