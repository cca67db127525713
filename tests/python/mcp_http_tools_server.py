"""A small MCP server for the end-to-end tests of `[[mcp.servers]] url`,
written with the official Python MCP SDK (PyPI `mcp`, its MCPServer,
formerly FastMCP), served over Streamable HTTP with uvicorn.

    python3 mcp_http_tools_server.py PORT TOKEN

Every request must carry `Authorization: Bearer TOKEN` (else 401), so the
test sees the daemon send its token_file. Tools: `add` (harmless) and
`unlock`, which adds the tool `late` at runtime and announces it with
`notifications/tools/list_changed` (on a `subscriptions/listen` stream at
protocol 2026-07-28, unscoped on earlier versions). Each start appends
this process's pid to the file named by MCP_PID_FILE (when set).
"""

import os
import sys

import uvicorn
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("droidwarden-test-http-tools")


@server.tool(description="Add two integers.")
def add(a: int, b: int) -> str:
    return f"{a} + {b} = {a + b}"


def late(text: str) -> str:
    return f"LATE {text}"


@server.tool(description="Unlock one more tool (late) and announce the change.")
async def unlock(ctx: Context) -> str:
    server.add_tool(late, description="A tool added at runtime.")
    await ctx.notify_tools_changed()
    try:
        # Sessions of protocol versions before 2026-07-28.
        await ctx.request_context.session.send_tool_list_changed()
    except Exception:  # noqa: BLE001 - not such a session
        pass
    return "unlocked late"


class BearerOnly:
    """401 unless the request carries the bearer token."""

    def __init__(self, app, token: str):
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            auth = dict(scope.get("headers", [])).get(b"authorization", b"")
            if auth != self.expected:
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [(b"www-authenticate", b"Bearer")],
                    }
                )
                await send({"type": "http.response.body", "body": b"no token"})
                return
        await self.app(scope, receive, send)


if __name__ == "__main__":
    port, token = int(sys.argv[1]), sys.argv[2]
    pid_file = os.environ.get("MCP_PID_FILE")
    if pid_file:
        with open(pid_file, "a", encoding="utf-8") as f:
            f.write(f"{os.getpid()}\n")
    app = BearerOnly(server.streamable_http_app(), token)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
