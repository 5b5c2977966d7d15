"""The connector contract, where connectors are written: `Connector`, what one returns
(`ToolOutput`) and what it raises (`UpstreamUnavailable`, `UnrecordableResult`).

They are defined in `toolkeeper.core.connector`, below the catalog, so that the catalog can
name what runs a tool without importing the connectors that fill it.
"""

from ..core.connector import Connector, ToolOutput, UnrecordableResult, UpstreamUnavailable

__all__ = ["Connector", "ToolOutput", "UnrecordableResult", "UpstreamUnavailable"]
