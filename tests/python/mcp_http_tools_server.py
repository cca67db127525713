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

import sys

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp_test_tools import add_unlock, record_pid

server = MCPServer("droidwarden-test-http-tools")


@server.tool(description="Add two integers.")
def add(a: int, b: int) -> str:
    return f"{a} + {b} = {a + b}"


add_unlock(server)


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
    record_pid()
    app = BearerOnly(server.streamable_http_app(), token)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
