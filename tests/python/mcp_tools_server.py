"""A small MCP server for the end-to-end tests of `[[mcp.servers]]`, written
with the official Python MCP SDK (PyPI `mcp`, its MCPServer, formerly
FastMCP), spoken over stdio.

Tools: `echo` (harmless), `wipe` (annotated destructive), `secret` (which
the tests deny) and `unlock`, which adds the tool `late` at runtime and
announces it with `notifications/tools/list_changed`. Each start appends this process's pid as one line to the
file named by MCP_PID_FILE (when set), so a test can kill it and see it
restarted.
"""

import os

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("droidwarden-test-tools")


@server.tool(description="Repeat the text back, upper-cased, with its length.")
def echo(text: str) -> str:
    return f"ECHO {text.upper()} ({len(text)} chars)"


@server.tool(
    description="Erase everything in the named box.",
    annotations=ToolAnnotations(destructive_hint=True),
)
def wipe(box: str) -> str:
    return f"wiped box {box}"


@server.tool(description="Tell the secret.")
def secret() -> str:
    return "the secret is 42"


def late(text: str) -> str:
    return f"LATE {text}"


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


if __name__ == "__main__":
    pid_file = os.environ.get("MCP_PID_FILE")
    if pid_file:
        with open(pid_file, "a", encoding="utf-8") as f:
            f.write(f"{os.getpid()}\n")
    server.run("stdio")
