// Makes MCP tool calls against a Tabbridge server with the official MCP TypeScript SDK client and
// prints every result whole (content items with their annotations and _meta, structuredContent,
// isError, the result's _meta), so a Go test can check what a standard client receives:
//   node calls.mjs <server url> <agent token> '<json array of {name, arguments}>'
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token, calls] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url + "/mcp"), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: "tabbridge-ts-calls", version: "1.0.0" });
await client.connect(transport);
const out = [];
for (const c of JSON.parse(calls)) {
  const r = await client.callTool({ name: c.name, arguments: c.arguments }, undefined, { timeout: 60000 });
  out.push({ isError: r.isError ?? false, content: r.content, structuredContent: r.structuredContent ?? null, _meta: r._meta ?? null });
}
console.log(JSON.stringify(out));
await client.close();
