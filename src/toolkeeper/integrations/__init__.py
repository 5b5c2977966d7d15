"""toolkeeper as the trusted executor inside the agent frameworks users already run.

- `toolkeeper.integrations.pydantic_ai`: `KeeperToolset`, a pydantic-ai toolset
  (`pip install "toolkeeper[pydantic-ai]"`).
- `toolkeeper.integrations.openai_agents`: `keeper_tools`, OpenAI Agents SDK `FunctionTool`s
  (`pip install "toolkeeper[openai-agents]"`).
- `toolkeeper.integrations.langchain`: `keeper_tools`, LangChain `BaseTool`s
  (`pip install "toolkeeper[langchain]"`).

Each shows the model the tools the run's principal may see (model-visible fields only) and
runs every call through `Keeper.execute`: no second route. This package imports no framework;
each module imports its own, with an ImportError naming the extra when it is missing.
"""

from ._bridge import RunScope

__all__ = ["RunScope"]
