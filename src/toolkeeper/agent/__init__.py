"""The agent loop on the keeper: a model proposes, the keeper checks, runs and records.

`Agent` runs select → export → model → parse → `keeper.execute_many` → format → repeat, pauses
for approvals and resumes from the ledger in any process. Model adapters speak each vendor's
API through its official SDK (`OpenAIChatModel`, `OpenAIResponsesModel`, `AnthropicModel`,
`GeminiModel`; extras `[openai]`, `[anthropic]`, `[gemini]`); no SDK is imported until an
adapter is made. What it is not: a second route to tools; every call goes through the keeper.
"""

from .anthropic import AnthropicModel
from .gemini import GeminiModel
from .loop import MODEL_RETRY, Agent
from .model import Model, ModelRequest, ModelResponse, OnText, Usage
from .models import PROVIDERS, resolve_model
from .openai import OpenAIChatModel, OpenAIResponsesModel
from .run import CallOutcome, RunResult, RunState, RunStatus, Verdicts
from .sizing import READ_RESULT
from .streaming import RunStream

__all__ = [
    "MODEL_RETRY",
    "PROVIDERS",
    "READ_RESULT",
    "Agent",
    "AnthropicModel",
    "CallOutcome",
    "GeminiModel",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "OnText",
    "OpenAIChatModel",
    "OpenAIResponsesModel",
    "RunResult",
    "RunState",
    "RunStatus",
    "RunStream",
    "Usage",
    "Verdicts",
    "resolve_model",
]
