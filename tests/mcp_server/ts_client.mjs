// The official TypeScript SDK's client (npm @modelcontextprotocol/sdk, 2025-11-25) against an
// agency's MCP endpoint: lists the tool, calls it with progress, continues the conversation,
// and is refused an unknown tool. Prints one JSON line of what it saw. test_mcp_sdk.py runs it
// from a folder whose node_modules holds the SDK.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, key] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${key}` } },
});
const client = new Client({ name: "agency-test", version: "1.0.0" });
await client.connect(transport);
const tools = await client.listTools();
const progress = [];
const first = await client.callTool(
  { name: "studio", arguments: { message: "a todo app" } },
  undefined,
  { onprogress: (p) => progress.push(p.message) },
);
const second = await client.callTool({
  name: "studio",
  arguments: { message: "a clock", conversation: first.structuredContent.conversation },
});
let unknown = null;
try {
  await client.callTool({ name: "nope", arguments: {} });
} catch (e) {
  unknown = e.code;
}
const out = {
  version: transport.protocolVersion,
  session: Boolean(transport.sessionId),
  tools: tools.tools.map((t) => t.name),
  answer: first.content[0].text,
  first: first.structuredContent,
  second: second.structuredContent,
  progress,
  unknown,
};
await transport.terminateSession();
await client.close();
console.log(JSON.stringify(out));
