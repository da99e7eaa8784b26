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
import { createInterface } from "node:readline";
import { timed } from "./timed.mjs";

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

// stats times n invocations of the page's tool with callers in flight at once, with this
// process's CPU per call.
async function stats(n, callers) {
  const cpu = process.cpuUsage();
  const s = await timed((i) => bridge.invokeTool("search", { q: `q${i}` }), n, callers);
  const used = process.cpuUsage(cpu);
  return { ...s, SocketCPU: (used.user + used.system) / n };
}

for await (const line of createInterface({ input: process.stdin })) {
  const [n, callers] = line.trim().split(/\s+/).map(Number);
  console.log(JSON.stringify(await stats(n, callers)));
}
await bridge.stop();
