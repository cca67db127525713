"""What the two test MCP servers (mcp_tools_server.py over stdio,
mcp_http_tools_server.py over Streamable HTTP) have in common: the
`unlock` tool, which adds the tool `late` at runtime and announces the
change, and the record of each start's pid."""

import os

from mcp.server.mcpserver import Context, MCPServer


def late(text: str) -> str:
    return f"LATE {text}"


def add_unlock(server: MCPServer) -> None:
    """Give `server` the tool `unlock`."""

    @server.tool(description="Unlock one more tool (late) and announce the change.")
    async def unlock(ctx: Context) -> str:
        server.add_tool(late, description="A tool added at runtime.")
        # At protocol 2026-07-28, on the client's subscriptions/listen stream.
        await ctx.notify_tools_changed()
        try:
            # Sessions of earlier protocol versions.
            await ctx.request_context.session.send_tool_list_changed()
        except Exception:  # noqa: BLE001 - not such a session
            pass
        return "unlocked late"


def record_pid() -> None:
    """Append this process's pid to the file named by MCP_PID_FILE (when
    set), so that a test can kill the server and see it restarted."""
    pid_file = os.environ.get("MCP_PID_FILE")
    if pid_file:
        with open(pid_file, "a", encoding="utf-8") as f:
            f.write(f"{os.getpid()}\n")
