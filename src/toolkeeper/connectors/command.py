"""Programs as tools: a `CommandConnector` runs one program per call, never through a shell.

What it is: the connector of one command-line tool. Its argv template is filled from the
call's validated arguments, each value one argv entry (`_argv.py`); the program gets only the
environment variables on its allow-list (taken from the gateway's environment) and those set
for it, runs in its working directory (or a sandbox, `sandbox.py`) in a process group of its
own with stdin closed, and its stdout and stderr are read up to a cap each (the rest is read
and dropped, so a chatty program is not blocked, and the result says it was cut). When the
program exits, what is left of its process group is killed; when the call ends early (its
timeout, a cancellation), the whole group is killed before the call returns.

Exit status: a success status (0 unless configured) is the result, `{"exit_code", "stdout",
"stderr"}` (or stdout parsed as JSON, `output="json"`); any other fails the call with the
code configured for it (TOOL_ERROR by default), the status and the end of stderr in its
details; a program killed by a signal fails with TOOL_ERROR. A program that cannot be started
(missing, not executable) is UPSTREAM_UNAVAILABLE: nothing ran; arguments longer than the
system passes are INVALID_ARGUMENTS.

What it is not: a shell, or a way to run what a model writes: the operator writes the
template, the model fills values.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import anyio.abc

from ..core.connector import UnrecordableResult, UpstreamUnavailable
from ..core.errors import ConfigurationError, ErrorCode
from ..core.signals import ToolFailed
from ..core.values import CallContext, ToolSpec
from ..schema.validate import Violation
from . import _argv
from .sandbox import Sandbox

__all__ = ["DEFAULT_MAX_OUTPUT_BYTES", "CommandConnector", "CommandParams"]

DEFAULT_MAX_OUTPUT_BYTES = 2**20
"""The most bytes of stdout (and of stderr) a call keeps unless configured otherwise."""
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
"""The program's PATH when neither its allow-list nor its own variables give one."""
_STDERR_TAIL = 2000
_CHUNK = 65536


@dataclass(frozen=True, kw_only=True, slots=True)
class CommandParams:
    """One program as a tool."""

    argv: _argv.Template
    """The argv template (the program first); see `_argv` for how it is filled."""
    env_allow: tuple[str, ...] = ()
    """Names of the gateway's environment variables the program gets (when set)."""
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    """Variables set for the program (over the allowed ones; left out of the repr)."""
    cwd: str | None = None
    """Its working directory (default: the gateway's); in a sandbox, see `Sandbox.writable`."""
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES
    """The most bytes of stdout, and of stderr, kept."""
    output: Literal["text", "json"] = "text"
    """`text`: the result is `{"exit_code", "stdout", "stderr"}`; `json`: stdout is JSON
    and is the result."""
    success_codes: frozenset[int] = frozenset({0})
    """Exit statuses that mean success."""
    exit_codes: Mapping[int, ErrorCode] = field(default_factory=dict)
    """The error code of each other status that means more than TOOL_ERROR (`2` →
    INVALID_ARGUMENTS)."""
    sandbox: Sandbox | None = None
    """Run it in this sandbox (bubblewrap); None runs it as the gateway's user."""


class CommandConnector:
    """Runs one program per call (see the module's docstring).

    Raises:
        ConfigurationError: (`__init__`) the program is not found on the gateway's PATH.
    """

    def __init__(self, params: CommandParams) -> None:
        program = params.argv[0] if params.argv else None
        if not isinstance(program, str) or "{" in program:
            raise ConfigurationError("a command's argv begins with its program, not a placeholder")
        found = program if os.sep in program else shutil.which(program)
        if found is None:
            raise ConfigurationError(f"program {program!r} is not on the PATH")
        self.params = params
        self._program = os.path.abspath(found)
        self._template: _argv.Template = (self._program, *params.argv[1:])
        for code in params.exit_codes.values():
            ToolFailed("", code=code)  # refuses the codes only the pipeline says

    @property
    def argument_check(self) -> Callable[[Mapping[str, Any]], list[Violation]]:
        """What the executor checks before anything is recorded (`_argv.check`)."""
        template = self._template
        return lambda arguments: _argv.check(template, arguments)

    def environment(self) -> dict[str, str]:
        """The program's environment: its allowed variables, then its own."""
        env = {k: os.environ[k] for k in self.params.env_allow if k in os.environ}
        env.update(self.params.env)
        env.setdefault("PATH", DEFAULT_PATH)
        return env

    async def invoke(self, spec: ToolSpec, arguments: Mapping[str, Any], ctx: CallContext) -> Any:
        """Run the program once with `arguments`.

        Raises:
            ToolFailed: it exited with a status that is not a success, or by a signal.
            UpstreamUnavailable: it could not be started (nothing ran).
            UnrecordableResult: `output="json"` and its stdout is not JSON.
        """
        argv = _argv.fill(self._template, arguments)
        sandbox = self.params.sandbox
        if sandbox is None:
            return await self._run(spec, argv, self.params.cwd)
        if sandbox.writable is not None:
            return await self._run(
                spec, sandbox.wrap(argv, workdir=sandbox.writable), sandbox.writable
            )
        with tempfile.TemporaryDirectory(prefix="tk-sandbox-") as workdir:
            return await self._run(spec, sandbox.wrap(argv, workdir=workdir), workdir)

    async def _run(self, spec: ToolSpec, argv: list[str], cwd: str | None) -> Any:
        try:
            process = await anyio.open_process(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env=self.environment(),
                start_new_session=True,
            )
        except OSError as exc:
            if exc.errno == errno.E2BIG:
                raise ToolFailed(
                    f"{spec.name}: the arguments are longer than the system can pass",
                    code=ErrorCode.INVALID_ARGUMENTS,
                ) from exc
            why = exc.strerror or type(exc).__name__
            raise UpstreamUnavailable(f"{spec.name}: the program could not start ({why})") from exc
        cap = self.params.max_output_bytes
        out, err = _Capped(cap), _Capped(cap)
        try:
            async with anyio.create_task_group() as tg:
                assert process.stdout is not None and process.stderr is not None
                tg.start_soon(out.drain, process.stdout)
                tg.start_soon(err.drain, process.stderr)
                await process.wait()
                _kill_group(process.pid)  # (what it left behind would hold the pipes open)
        finally:
            with anyio.CancelScope(shield=True):
                if process.returncode is None:
                    _kill_group(process.pid)
                await process.aclose()  # (reaps it and closes its pipes)
        return self._result(spec, process.returncode, out, err)

    def _result(self, spec: ToolSpec, status: int | None, out: _Capped, err: _Capped) -> Any:
        assert status is not None
        stderr = err.text()
        if status in self.params.success_codes:
            if self.params.output == "json":
                try:
                    return json.loads(out.data())
                except ValueError as exc:
                    raise UnrecordableResult(
                        f"{spec.name}: its output is not JSON ({exc})",
                        what="is not JSON" + (" (it was cut at the output cap)" if out.cut else ""),
                    ) from exc
            result: dict[str, Any] = {"exit_code": status, "stdout": out.text(), "stderr": stderr}
            if out.cut or err.cut:
                result["truncated"] = True
            return result
        details = {"exit_code": status, "stderr": stderr[-_STDERR_TAIL:]}
        if status < 0:
            name = _signal_name(-status)
            raise ToolFailed(f"{spec.name} was killed by {name}", details=details)
        code = self.params.exit_codes.get(status, ErrorCode.TOOL_ERROR)
        raise ToolFailed(f"{spec.name} exited with status {status}", code=code, details=details)


class _Capped:
    """One output stream, kept up to `cap` bytes; the rest read and dropped."""

    def __init__(self, cap: int) -> None:
        self._cap = cap
        self._chunks: list[bytes] = []
        self._size = 0
        self.cut = False

    async def drain(self, stream: anyio.abc.ByteReceiveStream) -> None:
        try:
            while True:
                chunk = await stream.receive(_CHUNK)
                room = self._cap - self._size
                if len(chunk) > room:
                    self.cut = True
                    chunk = chunk[: max(room, 0)]
                if chunk:
                    self._chunks.append(chunk)
                    self._size += len(chunk)
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            return

    def data(self) -> bytes:
        return b"".join(self._chunks)

    def text(self) -> str:
        return self.data().decode("utf-8", "replace")


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
