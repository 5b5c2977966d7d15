"""Tool definitions, calls, results and tool_choice in every vendor's format — with loss reports.

One module per format (`openai_chat`, `openai_responses`, `anthropic`, `gemini`, `mcp`), each a
`Dialect`: export and import of definitions, `parse` of model responses into `ToolCall`s,
`format_result` of `ToolResult`s, and tool_choice mapping. Import-only readers for third-party
corpora (`bfcl`, `sealtools`). Every conversion returns a `Converted` value with the `Loss`
entries that say what did not survive; `strict=True` raises `LossError` instead.

Pure functions: no I/O, no vendor SDK imports.
"""

from .anthropic import Anthropic
from .base import Dialect, Importer
from .bfcl import BFCL
from .choice import ChoiceMode, ToolChoice
from .gemini import Gemini
from .mcp import MCP
from .openai_chat import OpenAIChat
from .openai_responses import OpenAIResponses
from .registry import DIALECTS, IMPORTERS, get_dialect, get_importer
from .report import Action, Converted, Loss, LossError
from .sealtools import SealTools
from .wire import NotAFunction

__all__ = [
    "BFCL",
    "DIALECTS",
    "IMPORTERS",
    "MCP",
    "Action",
    "Anthropic",
    "ChoiceMode",
    "Converted",
    "Dialect",
    "Gemini",
    "Importer",
    "Loss",
    "LossError",
    "NotAFunction",
    "OpenAIChat",
    "OpenAIResponses",
    "SealTools",
    "ToolChoice",
    "get_dialect",
    "get_importer",
]
