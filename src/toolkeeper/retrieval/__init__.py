"""Tool retrieval: which tools a model gets to see for one turn.

Hard filter first (`toolkeeper.policy.may_use`, tenant, environment, connected sources), then
keyword (BM25 on tantivy) and dense (all-MiniLM-L6-v2, int8 ONNX, offline; queries mapped by a
learned `QueryAdapter`) rankings fused,
abstention when nothing fits, and the progressive-discovery meta-tools. Importing this package
imports no optional dependency; building an index needs `pip install "toolkeeper[retrieval]"`.
"""

from .adapter import AdapterSet, QueryAdapter, bundled_adapter, fit_query_adapter
from .dense import VectorIndex
from .embed import (
    Embedder,
    EmbeddingCache,
    HashingEmbedder,
    MiniLMEmbedder,
    default_cache_path,
)
from .fusion import AbstentionModel, Coverage, FusionConfig, RankModel, fuse
from .keyword import KeywordIndex
from .meta import (
    CALL_TOOL,
    GET_TOOL_DETAILS,
    META_TOOL_NAMES,
    SEARCH_TOOLS,
    CallFunction,
    meta_specs,
    meta_tools,
)
from .selection import Candidate, Selection
from .selector import META_TAG, Ranking, Selector
from .text import QueryContext, ToolText, compose_query, split_identifier, tool_text
from .tokens import count_tokens, tool_definition_json

__all__ = [
    "CALL_TOOL",
    "GET_TOOL_DETAILS",
    "META_TAG",
    "META_TOOL_NAMES",
    "SEARCH_TOOLS",
    "AbstentionModel",
    "AdapterSet",
    "CallFunction",
    "Candidate",
    "Coverage",
    "Embedder",
    "EmbeddingCache",
    "FusionConfig",
    "HashingEmbedder",
    "KeywordIndex",
    "MiniLMEmbedder",
    "QueryAdapter",
    "QueryContext",
    "RankModel",
    "Ranking",
    "Selection",
    "Selector",
    "ToolText",
    "VectorIndex",
    "bundled_adapter",
    "compose_query",
    "count_tokens",
    "default_cache_path",
    "fit_query_adapter",
    "fuse",
    "meta_specs",
    "meta_tools",
    "split_identifier",
    "tool_definition_json",
    "tool_text",
]
