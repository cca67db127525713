// An independent MCP client for the elicitation tests: the official
// TypeScript MCP SDK (`@modelcontextprotocol/sdk`, pinned in package.json),
// which speaks protocol 2025-11-25, declares form elicitation and answers
// the server's `elicitation/create` requests during a tools/call.
//
// Usage: node elicit_client.cjs PLAN_JSON (with NODE_PATH at the tests'
// node_modules). PLAN: {"stdio": [argv...], "answers": [ElicitResult...],
// "steps": [{"op": "call", "name", "arguments"}]}. Each elicitation takes
// the next answer. One JSON object per line on stdout, in order:
// {"op": "connected", "protocol"}, {"op": "elicited", "params"},
// {"op": "call", "name", "result"}; {"op": "failed", "error"} on failure.

const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = require("@modelcontextprotocol/sdk/client/stdio.js");
const types = require("@modelcontextprotocol/sdk/types.js");

const emit = (o) => process.stdout.write(JSON.stringify(o) + "\n");

async function main() {
  const plan = JSON.parse(process.argv[2]);
  const answers = [...(plan.answers || [])];
  const client = new Client(
    { name: "droidwarden-elicit-test", version: "0" },
    { capabilities: { elicitation: { form: {} } } },
  );
  client.setRequestHandler(types.ElicitRequestSchema, async (request) => {
    emit({ op: "elicited", params: request.params });
    return answers.shift() || { action: "cancel" };
  });
  const [command, ...args] = plan.stdio;
  const transport = new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" });
  await client.connect(transport);
  emit({ op: "connected", protocol: types.LATEST_PROTOCOL_VERSION });
  for (const step of plan.steps) {
    if (step.op !== "call") throw new Error(`unknown op ${step.op}`);
    // The call may wait for a person: allow the approval's time.
    const result = await client.callTool(
      { name: step.name, arguments: step.arguments || {} },
      undefined,
      { timeout: 120000 },
    );
    emit({ op: "call", name: step.name, result });
  }
  await client.close();
}

main().catch((e) => {
  emit({ op: "failed", error: String((e && e.stack) || e) });
  process.exit(1);
});
