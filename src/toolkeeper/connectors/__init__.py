"""Connectors: what runs a tool — Python functions, upstream MCP servers (`connectors.mcp`),
HTTP services (`connectors.http`, the `http` extra) and programs, optionally sandboxed."""

from .base import Connector, ToolOutput, UpstreamUnavailable
from .command import CommandConnector, CommandParams
from .python import FunctionConnector
from .sandbox import Sandbox

__all__ = [
    "CommandConnector",
    "CommandParams",
    "Connector",
    "FunctionConnector",
    "Sandbox",
    "ToolOutput",
    "UpstreamUnavailable",
]
