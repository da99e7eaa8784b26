// Connects to a Tabbridge server's /mcp with no token, as Claude Code does,
// through the official TypeScript SDK's OAuth client provider:
//   node oauth.mjs <server url> <state file> <site> <tool> <arguments json> [client metadata URL]
// It listens for the authorization response on a loopback port, prints
// {"authorize": url} for the test to open in the browser, exchanges the code
// (checking state and the RFC 9207 iss), then lists tools, calls
// listSiteTools and callSiteTool and prints one JSON object with what it saw.
// With a client metadata URL it identifies itself by that document instead
// of registering. Registration and tokens are kept in the state file, so a second run
// reuses them: with an expired access token it refreshes, with no browser.
import fs from "node:fs";
import http from "node:http";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";

const [url, stateFile, site, tool, args, metadataUrl] = process.argv.slice(2);
const state = fs.existsSync(stateFile) ? JSON.parse(fs.readFileSync(stateFile, "utf8")) : {};
const save = () => fs.writeFileSync(stateFile, JSON.stringify(state));
const out = (o) => process.stdout.write(JSON.stringify(o) + "\n");

let gotCallback;
const callback = new Promise((resolve) => { gotCallback = resolve; });
const listener = http.createServer((req, res) => {
  const u = new URL(req.url, "http://127.0.0.1");
  if (u.pathname !== "/callback") {
    res.writeHead(404).end();
    return;
  }
  res.writeHead(200, { "content-type": "text/html" }).end("<p id=done>Signed in; you can close this tab.</p>");
  gotCallback(Object.fromEntries(u.searchParams));
});
await new Promise((resolve) => listener.listen(0, "127.0.0.1", resolve));
const redirectUrl = `http://127.0.0.1:${listener.address().port}/callback`;

let flows = 0;
let sentState;
const provider = {
  get redirectUrl() { return redirectUrl; },
  get clientMetadataUrl() { return metadataUrl || undefined; },
  get clientMetadata() {
    return {
      client_name: "TypeScript SDK test agent",
      redirect_uris: [redirectUrl],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  },
  state: () => (sentState = "st-" + Math.random().toString(36).slice(2)),
  clientInformation: () => state.client,
  saveClientInformation: (c) => { state.client = c; save(); },
  tokens: () => state.tokens,
  saveTokens: (t) => { state.tokens = t; save(); },
  redirectToAuthorization: (u) => { flows++; out({ authorize: u.toString() }); },
  saveCodeVerifier: (v) => { state.verifier = v; save(); },
  codeVerifier: () => state.verifier,
  invalidateCredentials: (scope) => {
    if (scope === "all" || scope === "client") delete state.client;
    if (scope === "all" || scope === "tokens") delete state.tokens;
    save();
  },
};

const newTransport = () => new StreamableHTTPClientTransport(new URL(url + "/mcp"), { authProvider: provider });
let transport = newTransport();
let client = new Client({ name: "tabbridge-ts-oauth", version: "1.0.0" });
try {
  await client.connect(transport);
} catch (e) {
  if (!(e instanceof UnauthorizedError)) throw e;
  const cb = await callback;
  if (cb.error) throw new Error(`authorization refused: ${cb.error}: ${cb.error_description}`);
  if (cb.state !== sentState) throw new Error(`state ${cb.state} is not the one sent`);
  if (cb.iss !== url) throw new Error(`iss ${cb.iss} is not the issuer ${url} (RFC 9207)`);
  await transport.finishAuth(cb.code);
  transport = newTransport();
  client = new Client({ name: "tabbridge-ts-oauth", version: "1.0.0" });
  await client.connect(transport);
}
const tools = (await client.listTools()).tools.map((t) => t.name).sort();
const listing = await client.callTool({ name: "listSiteTools", arguments: {} });
const call = await client.callTool({ name: "callSiteTool", arguments: { site, tool, arguments: JSON.parse(args) } });
out({
  flows,
  tools,
  listing: listing.structuredContent,
  result: call.content.map((c) => c.text).join(""),
  isError: call.isError ?? false,
  accessToken: state.tokens?.access_token,
});
await client.close();
listener.close();
