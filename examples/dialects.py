"""One tool call in each vendor's format: the definition exported, the model's call parsed,
run through the keeper, and its result formatted back, for OpenAI Chat Completions, OpenAI
Responses, Anthropic Messages, Gemini and MCP.

    python examples/dialects.py     # pure conversions on a memory ledger; no network, no SDK
"""

from __future__ import annotations

import json
from typing import Any

import anyio
from msgspec.structs import replace  # calls and results are msgspec Structs

from toolkeeper import Keeper, Principal
from toolkeeper.dialects import get_dialect

ARGS = json.dumps({"city": "Paris", "days": 2})


def vendor_response(dialect: str, name: str) -> Any:
    """What each vendor's API answers when its model calls the tool `name` (as exported),
    trimmed to what matters."""
    return json.loads(json.dumps(RESPONSES[dialect]).replace("WIRE_NAME", name))


RESPONSES: dict[str, Any] = {
    "openai_chat": {
        "id": "chatcmpl-1",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_abc",
                            "type": "function",
                            "function": {"name": "WIRE_NAME", "arguments": ARGS},
                        }
                    ],
                },
            }
        ],
    },
    "openai_responses": {
        "id": "resp_1",
        "output": [
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_abc",
                "name": "WIRE_NAME",
                "arguments": ARGS,
            }
        ],
    },
    "anthropic": {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "content": [
            {
                "type": "tool_use",
                "id": "toolu_abc",
                "name": "WIRE_NAME",
                "input": {"city": "Paris", "days": 2},
            }
        ],
    },
    "gemini": {
        "responseId": "resp-gem-1",
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [
                        {
                            "functionCall": {
                                "name": "WIRE_NAME",
                                "args": {"city": "Paris", "days": 2},
                            }
                        }
                    ],
                }
            }
        ],
    },
    "mcp": {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "WIRE_NAME", "arguments": {"city": "Paris", "days": 2}},
    },
}

VIEWER = Principal(id="viewer", grants=frozenset({"weather:read"}))


async def main() -> None:
    keeper = Keeper(ledger="memory://")

    @keeper.tool(name="weather.forecast", effect="read_only", permissions=["weather:read"])
    def forecast(city: str, days: int = 1) -> dict[str, Any]:
        """The weather forecast for a city.

        Args:
            city: The city's name, e.g. "Paris".
            days: How many days ahead, 1 to 7.
        """
        return {"city": city, "days": days, "sky": "clear"}

    async with keeper:
        tools = keeper.visible_tools(VIEWER)
        for name in RESPONSES:
            dialect = get_dialect(name)
            exported = dialect.export_tools(tools)  # definitions + report of what was lost
            (definition,) = exported.value
            wire = dialect.wire_name(definition)  # OpenAI and Anthropic take no dot in a name
            print(f"== {name}")
            print("  exported as:", wire, f"({len(exported.losses)} losses)")
            (call,) = dialect.parse(vendor_response(name, wire), tools=tools)
            print("  parsed:", call.call_id, call.name, call.arguments)
            # parsed calls name no principal: say who the call acts for
            result = await keeper.execute(replace(call, principal=VIEWER))
            reply = dialect.format_result(result, tools=tools)
            print("  result:", json.dumps(reply, sort_keys=True))


if __name__ == "__main__":
    anyio.run(main)
