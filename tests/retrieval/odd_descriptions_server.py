"""An MCP server over stdio whose tools are described as real catalogs describe theirs at worst:
not at all, at great length, in Chinese, in markup, with emoji and control characters."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("odd-descriptions")
READ = ToolAnnotations(read_only_hint=True)

_MANUAL = "\n\n".join(
    f"## Section {i}\n\nThis paragraph explains option number {i} of the reporting engine, "
    "its defaults, its interactions with the other options and the errors it may raise."
    for i in range(400)
)


@server.tool(annotations=READ, description="")
def purge_stale_cache_entries(older_than_days: int) -> str:
    return "ok"


@server.tool(
    annotations=READ,
    description=_MANUAL + "\n\nFinally, it renders the quarterly_turnover_histogram chart.",
)
def build_report(spec: str) -> str:
    return "ok"


@server.tool(annotations=READ, description="查询指定城市的实时天气，包括温度、湿度和风力。")
def weather_cn(city: str) -> str:
    return "晴"


@server.tool(annotations=READ, description="查询12306火车票余票和车次信息。")
def train_tickets(origin: str, destination: str, date: str) -> str:
    return "有票"


@server.tool(
    annotations=READ,
    description=(
        "<p><b>Convert</b> a <a href='https://example.org'>Markdown</a> document to HTML.</p>\n"
        "```python\nconvert(md)\n```\n| input | output |\n|---|---|\n| md | html |\n"
        "<!-- internal: do not show -->\n{{template}} [[wiki]] \\u0000"
    ),
)
def markdown_to_html(markdown: str) -> str:
    return "<p></p>"


@server.tool(annotations=READ, description="🚀🔥 Launch a rocket\u200b\u202e\x07 to orbit ✨")
def launch_rocket(payload: str) -> str:
    return "launched"


if __name__ == "__main__":
    server.run("stdio")
