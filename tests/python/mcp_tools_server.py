"""A small MCP server for the end-to-end tests of `[[mcp.servers]]`, written
with the official Python MCP SDK (PyPI `mcp`, its MCPServer, formerly
FastMCP), spoken over stdio.

Tools: `echo` (harmless), `wipe` (annotated destructive), `secret` (which
the tests deny) and `unlock`, which adds the tool `late` at runtime and
announces it with `notifications/tools/list_changed`. Each start appends this process's pid as one line to the
file named by MCP_PID_FILE (when set), so a test can kill it and see it
restarted.
"""

from mcp.server.mcpserver import MCPServer
from mcp_test_tools import add_unlock, record_pid
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


add_unlock(server)


if __name__ == "__main__":
    record_pid()
    server.run("stdio")
