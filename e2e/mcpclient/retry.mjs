// Calls a tool the way a standard client that gives up does: the MCP
// TypeScript SDK with a short request timeout (it then sends
// notifications/cancelled, "Request timed out"), then the same call again
// with a long one, as clients that retry after their 60 s timeout do. It
// retries once a line arrives on stdin, so the test decides when.
//   node retry.mjs <server url> <agent token> <site> <tool> <arguments json> <task id> <first timeout ms>
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token, site, tool, args, taskId, firstTimeout] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url + "/mcp"), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: "tabbridge-ts-retry", version: "1.0.0" });
await client.connect(transport);
const params = { name: "callSiteTool", arguments: { site, tool, taskId, arguments: JSON.parse(args) } };
let first;
try {
  await client.callTool(params, undefined, { timeout: Number(firstTimeout) });
  first = "answered";
} catch (e) {
  first = String(e);
}
console.error("first call: " + first);
await new Promise((resolve) => process.stdin.once("data", resolve));
process.stdin.pause();
const call = await client.callTool(params, undefined, { timeout: 60000 });
console.log(JSON.stringify({ first, result: call.content.map((c) => c.text).join(""), isError: call.isError ?? false }));
await client.close();
