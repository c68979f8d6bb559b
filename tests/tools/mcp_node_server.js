// A stdio MCP server in plain Node (no packages): what `node server.js` servers look like to the sandbox.
// Speaks newline-delimited JSON-RPC: initialize, tools/list, tools/call (echo, node_version).
"use strict";
const readline = require("readline");

const tools = [
  {name: "echo", description: "Echo the text back.", inputSchema: {type: "object", properties: {text: {type: "string"}}, required: ["text"]}},
  {name: "node_version", description: "The Node.js version running the server.", inputSchema: {type: "object", properties: {}}},
];

function reply(id, result) {
  process.stdout.write(JSON.stringify({jsonrpc: "2.0", id, result}) + "\n");
}

readline.createInterface({input: process.stdin}).on("line", (line) => {
  let msg;
  try { msg = JSON.parse(line); } catch (e) { return; }
  if (msg.id === undefined) return;  // notifications
  if (msg.method === "initialize") {
    reply(msg.id, {protocolVersion: msg.params.protocolVersion, capabilities: {tools: {}}, serverInfo: {name: "node-demo", version: "1.0.0"}});
  } else if (msg.method === "tools/list") {
    reply(msg.id, {tools});
  } else if (msg.method === "tools/call") {
    const text = msg.params.name === "echo" ? String(msg.params.arguments.text) : process.version;
    reply(msg.id, {content: [{type: "text", text}], isError: false});
  } else {
    process.stdout.write(JSON.stringify({jsonrpc: "2.0", id: msg.id, error: {code: -32601, message: "no such method"}}) + "\n");
  }
});
