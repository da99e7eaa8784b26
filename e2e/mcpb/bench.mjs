// Times the same page tool called from one MCP client two ways, in one process and one run:
//   mcpb:      MCP-B's relay (@mcp-b/webmcp-local-relay), spawned as its stdio MCP server, which
//              reaches the page over its WebSocket to the page's hidden iframe (embed.js);
//   tabbridge: Tabbridge's /mcp (Streamable HTTP) → server → the extension's socket → the
//              extension's worker → the tab's bridge and observer.
// Both use the official MCP TypeScript SDK client and time client.callTool with
// performance.now(), from the request to its parsed result.
//   node bench.mjs <relay port> <server url> <agent token> <site origin> <calls> <rounds> <home>
// It prints "relay" once the relay listens, waits for a line on its standard input (the page is
// open and shared), then prints one JSON line: {rounds: [{callers, mcpb: stats, tabbridge: stats}]}.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import { timed } from "./timed.mjs";

const [port, server, token, site, callsArg, roundsArg, home] = process.argv.slice(2);
const calls = Number(callsArg);
const rounds = Number(roundsArg);
const relayCli = fileURLToPath(new URL("node_modules/@mcp-b/webmcp-local-relay/dist/cli.js", import.meta.url));

const mcpb = new Client({ name: "tabbridge-bench-mcpb", version: "1.0.0" });
await mcpb.connect(new StdioClientTransport({
  command: process.execPath,
  args: [relayCli, "--port", port],
  env: { ...process.env, HOME: home }, // the relay keeps its port in ~/.webmcp: a test's own home
  stderr: "ignore",
}));
const tabbridge = new Client({ name: "tabbridge-bench", version: "1.0.0" });

// Whatever happens, the relay (a child of this process) is closed on the way out: left running
// it would hold its port and keep the page's iframe busy.
try {
  await main();
} finally {
  await mcpb.close().catch(() => {});
  await tabbridge.close().catch(() => {});
}

async function main() {
  console.log("relay");
  const [go] = await Promise.race([once(process.stdin, "data"), once(process.stdin, "end").then(() => [null])]);
  if (go === null) throw new Error("the test ended before the page was ready");
  process.stdin.pause();
  await tabbridge.connect(new StreamableHTTPClientTransport(new URL(server + "/mcp"), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  }));

  // The page's iframe dials the relay with backoff (0.5 → 3 s); wait until its tool is listed.
  const until = Date.now() + 30000;
  for (;;) {
    const { tools } = await mcpb.listTools();
    if (tools.some((t) => t.name === "search")) break;
    if (Date.now() > until) {
      const sources = await mcpb.callTool({ name: "webmcp_list_sources", arguments: {} });
      throw new Error(`MCP-B's relay lists no search tool after 30 s: ${tools.map((t) => t.name).join(", ")}; its sources: ${JSON.stringify(sources.content)}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  await tabbridge.listTools();

  const paths = {
    mcpb: (i) => mcpb.callTool({ name: "search", arguments: { q: `q${i}` } }, undefined, { timeout: 15000 }),
    tabbridge: (i) => tabbridge.callTool({ name: "callSiteTool", arguments: { site, tool: "search", arguments: { q: `q${i}` } } }, undefined, { timeout: 15000 }),
  };
  for (const path of ["mcpb", "tabbridge"]) await timed(paths[path], 100, 8); // warm both paths
  const out = [];
  for (let r = 0; r < rounds; r++) {
    for (const callers of [1, 8]) {
      const row = { callers };
      // Alternate which path goes first, so neither always runs on the other's leftovers.
      for (const path of r % 2 === 0 ? ["mcpb", "tabbridge"] : ["tabbridge", "mcpb"]) row[path] = await timed(paths[path], calls, callers);
      out.push(row);
    }
  }
  console.log(JSON.stringify({ rounds: out }));
}
