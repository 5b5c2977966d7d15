"""Admit: pass a call through the gates in order, up to the first that answers.

Admission never writes a call record: what a gate answers (`steps.Step`) is carried out by
the executor, through the journal.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import CoroutineType
from typing import cast

from .runtime import Runtime
from .state import CallState
from .steps import Gate, Step

__all__ = ["admit"]


async def admit(rt: Runtime, st: CallState, pipeline: Sequence[Gate]) -> Step:
    """The first step a gate of `pipeline` answers other than going on; None when every gate
    lets the call run.

    Raises:
        CallRefused: a gate refused the call.
    """
    for gate in pipeline:
        answer = gate(rt, st)
        if answer is None:
            continue
        # (a gate that must wait returns the coroutine of its step: see `steps`)
        step = await answer if type(answer) is CoroutineType else cast(Step, answer)
        if step is not None:
            return step
    return None
