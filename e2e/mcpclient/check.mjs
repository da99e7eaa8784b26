// Drives a Tabbridge server's /mcp endpoint with the official MCP TypeScript
// SDK client, as Claude Code and other standard clients do:
//   node check.mjs <server url> <agent token> <site> <tool> <arguments json>
// It lists the tools, calls listSiteTools and callSiteTool with a progress
// handler, and prints one JSON object with what it saw.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token, site, tool, args] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url + "/mcp"), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: "tabbridge-ts-check", version: "1.0.0" });
await client.connect(transport);
const tools = (await client.listTools()).tools.map((t) => t.name).sort();
const listing = await client.callTool({ name: "listSiteTools", arguments: {} });
let progress = 0;
const call = await client.callTool(
  { name: "callSiteTool", arguments: { site, tool, arguments: JSON.parse(args) } },
  undefined,
  { onprogress: () => { progress++; }, timeout: 60000 },
);
const bad = await client.callTool({ name: "callSiteTool", arguments: { site, tool: "noSuchTool" } });
console.log(JSON.stringify({
  sessionId: transport.sessionId,
  tools,
  listing: listing.structuredContent,
  result: call.content.map((c) => c.text).join(""),
  isError: call.isError ?? false,
  badError: bad.content.map((c) => c.text).join(""),
  badIsError: bad.isError ?? false,
  progress,
}));
await client.close();
