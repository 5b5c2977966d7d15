"""Local demo tools for the example gateway (`examples/toolkeeper.toml`).

A tool module for `toolkeeper serve` defines `register(keeper)`, which adds its tools with
`keeper.tool`. These keep notes in memory: one read, one write, one destructive tool (which
needs a person's approval by default).
"""

from __future__ import annotations

from typing import Any

_NOTES: list[str] = []


def register(keeper: Any) -> None:
    """Add the demo tools to `keeper`."""

    @keeper.tool(name="demo.list_notes", effect="read_only", permissions=["notes:read"])
    def list_notes() -> list[str]:
        """List the notes kept so far.

        Returns:
            The notes, oldest first.
        """
        return list(_NOTES)

    @keeper.tool(name="demo.add_note", effect="write", permissions=["notes:write"])
    def add_note(text: str) -> str:
        """Keep a short note. Side effect: the note is stored until the gateway stops.

        Args:
            text: The note.
        """
        _NOTES.append(text)
        return f"note {len(_NOTES)} kept"

    @keeper.tool(name="demo.clear_notes", effect="destructive", permissions=["notes:write"])
    def clear_notes() -> str:
        """Delete every note. Cannot be undone; needs a person's approval."""
        count = len(_NOTES)
        _NOTES.clear()
        return f"{count} notes deleted"
