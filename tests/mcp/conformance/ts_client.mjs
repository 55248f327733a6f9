// The TypeScript SDK (1.32) as a client of a maitre server: list tools, call one, print JSON.
// Usage: node ts_client.mjs SDK_DIR URL TOOL ARGS_JSON
import { pathToFileURL } from "node:url";
const [sdkDir, url, tool, args] = process.argv.slice(2);
const { Client } = await import(pathToFileURL(`${sdkDir}/dist/esm/client/index.js`).href);
const { StreamableHTTPClientTransport } = await import(
  pathToFileURL(`${sdkDir}/dist/esm/client/streamableHttp.js`).href
);
const transport = new StreamableHTTPClientTransport(new URL(url));
const client = new Client({ name: "ts-probe", version: "0.0.1" });
await client.connect(transport);
const { tools } = await client.listTools();
const result = await client.callTool({ name: tool, arguments: JSON.parse(args) });
console.log(JSON.stringify({ protocol: transport.protocolVersion, tools: tools.map((t) => t.name), result }));
await client.close();
