"""Admit: pass a call through the gates in order, up to the first that answers.

Admission never writes a call record: what a gate answers (`steps.Step`) is carried out by
the executor, through the journal.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import CoroutineType
from typing import cast

from ..core.errors import CallRefused
from .runtime import Runtime
from .state import CallState
from .steps import Abandoned, Gate, Hold, Step

__all__ = ["admit"]


async def admit(rt: Runtime, st: CallState, pipeline: Sequence[Gate]) -> Step:
    """The first step a gate of `pipeline` answers other than going on; None when every gate
    lets the call run.

    Raises:
        CallRefused: a gate refused the call.
    """
    gate: Gate | None = None
    try:
        for gate in pipeline:
            answer = gate(rt, st)
            if answer is None:
                continue
            # (a gate that must wait returns the coroutine of its step: see `steps`)
            step = await answer if type(answer) is CoroutineType else cast(Step, answer)
            if step is not None:
                if st.trace is not None:
                    st.trace.decided(_name(gate), _DECISIONS.get(type(step), "answered"))
                return step
    except CallRefused as refused:
        if st.trace is not None and gate is not None:
            st.trace.decided(_name(gate), "refused", refused.error)
        raise
    if st.trace is not None and gate is not None:
        st.trace.decided(_name(gate), "admitted")
    return None


_DECISIONS = {Hold: "held", Abandoned: "abandoned"}
"""A step's decision as telemetry names it (any other step: the call is answered now)."""


def _name(gate: Gate) -> str:
    return str(getattr(gate, "__name__", type(gate).__name__))
