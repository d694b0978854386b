"""A small MCP server on the official Python SDK (the `mcp` package), for what no stock server
shows: a tool list that changes on request, and the headers a client sent, on the 2026-07-28
protocol (stdio, or stateless Streamable HTTP).

    python dynamic_server.py stdio
    python dynamic_server.py http PORT     # http://127.0.0.1:PORT/mcp
"""

import sys

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("dynamic")


@server.tool()
def echo(text: str) -> str:
    """Returns its text."""
    return text


@server.tool()
def header(name: str, ctx: Context) -> str:
    """Returns the value of the HTTP request's header `name` (empty without one, or on stdio)."""
    return (ctx.headers or {}).get(name, "")


@server.tool()
async def add_tool(name: str, ctx: Context) -> str:
    """Adds a tool called `name` (which returns its name) and announces the change."""

    def added() -> str:
        return name

    server.add_tool(added, name=name, description=f"Added at run time: {name}")
    await ctx.notify_tools_changed()
    return f"added {name}"


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        server.run(
            "streamable-http",
            host="127.0.0.1",
            port=int(sys.argv[2]),
            stateless_http=True,
        )
    else:
        server.run("stdio")
