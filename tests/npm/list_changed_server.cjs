// A small MCP server for the end-to-end test of `[[mcp.servers]]` hearing
// an unscoped `notifications/tools/list_changed`: the official TypeScript
// MCP SDK (`@modelcontextprotocol/sdk`, pinned in package.json; its
// McpServer), which speaks protocol 2025-11-25 at most, over stdio.
//
// It starts with one tool, `unlock`; a call of it registers a second tool,
// `late`, and the SDK announces the change with
// `notifications/tools/list_changed` (unasked, as servers before 2026-07-28
// do). Every JSON-RPC message it receives or sends is appended, one JSON
// object a line ({"dir": "in"|"out", "message": ...}), to the file named by
// MCP_TRACE_FILE, so a test can see the handshake and the notification.
//
// Usage: node list_changed_server.cjs (with NODE_PATH at the tests'
// node_modules).

const fs = require("node:fs");
const { McpServer } = require("@modelcontextprotocol/sdk/server/mcp.js");
const { StdioServerTransport } = require("@modelcontextprotocol/sdk/server/stdio.js");
const { z } = require("zod");

const traceFile = process.env.MCP_TRACE_FILE;
const trace = (dir, message) => {
  if (traceFile) fs.appendFileSync(traceFile, JSON.stringify({ dir, message }) + "\n");
};

async function main() {
  const server = new McpServer({ name: "droidwarden-test-ts", version: "0" });
  let late = null;
  server.registerTool(
    "unlock",
    { description: "Unlock one more tool (late); the server announces the change." },
    async () => {
      if (!late) {
        // Registering after connect sends notifications/tools/list_changed.
        late = server.registerTool(
          "late",
          {
            description: "A tool added at runtime: repeats the text.",
            inputSchema: { text: z.string() },
          },
          async ({ text }) => ({ content: [{ type: "text", text: `LATE ${text}` }] }),
        );
      }
      return { content: [{ type: "text", text: "unlocked late" }] };
    },
  );
  const transport = new StdioServerTransport();
  await server.connect(transport);
  // Trace both ways (connect has installed the server's handler).
  const receive = transport.onmessage;
  transport.onmessage = (message, extra) => {
    trace("in", message);
    receive(message, extra);
  };
  const send = transport.send.bind(transport);
  transport.send = (message, options) => {
    trace("out", message);
    return send(message, options);
  };
}

main().catch((e) => {
  process.stderr.write(`list_changed_server: ${(e && e.stack) || e}\n`);
  process.exit(1);
});
