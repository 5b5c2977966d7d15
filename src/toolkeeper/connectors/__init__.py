"""Connectors: what runs a tool — Python functions, upstream MCP servers, and more."""

from .base import Connector, ToolOutput, UpstreamUnavailable
from .python import FunctionConnector

__all__ = ["Connector", "FunctionConnector", "ToolOutput", "UpstreamUnavailable"]
