// Times what the official MCP TypeScript SDK client costs against a Tabbridge server: its ping and
// a callSiteTool (to a Go test browser that answers at once) over Streamable HTTP, beside a bare
// fetch of /healthz from the same process, the HTTP floor under both.
//   node cost.mjs <server url> <agent token> <site origin> <calls>
// It prints one JSON line: {ping, call, fetch: {p50, p99} in milliseconds}; a call that fails ends
// it with an error.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { performance } from "node:perf_hooks";

const [url, token, site, callsArg] = process.argv.slice(2);
const calls = Number(callsArg);
const client = new Client({ name: "tabbridge-client-cost", version: "1.0.0" });
await client.connect(new StreamableHTTPClientTransport(new URL(url + "/mcp"), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
}));

// timed runs f calls times one after another (after a tenth as many to warm up) and returns p50
// and p99 in milliseconds.
async function timed(f) {
  for (let i = 0; i < Math.ceil(calls / 10); i++) await f(i);
  const d = [];
  for (let i = 0; i < calls; i++) {
    const start = performance.now();
    await f(i);
    d.push(performance.now() - start);
  }
  d.sort((a, b) => a - b);
  return { p50: d[Math.floor(d.length / 2)], p99: d[Math.min(d.length - 1, Math.floor(d.length * 0.99))] };
}

const out = {
  ping: await timed(() => client.ping()),
  call: await timed(async (i) => {
    const r = await client.callTool({ name: "callSiteTool", arguments: { site, tool: "search", arguments: { q: `q${i}` } } });
    if (r.isError) throw new Error(`callSiteTool failed: ${JSON.stringify(r.content)}`);
  }),
  fetch: await timed(async () => {
    const r = await fetch(url + "/healthz");
    if (!r.ok) throw new Error(`/healthz answered ${r.status}`);
    await r.text();
  }),
};
console.log(JSON.stringify(out));
await client.close();
