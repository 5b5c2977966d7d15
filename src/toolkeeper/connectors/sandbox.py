"""Running a program in a sandbox: bubblewrap (`bwrap`), from Debian's `bubblewrap` package.

What it is: `Sandbox`, what a sandboxed program may see, and `Sandbox.wrap`, which turns a
program's argv into bubblewrap's. Inside, the program has new namespaces of every kind (its
own PID namespace and `/proc`: the gateway's process, its `/proc/<pid>/environ` and its open
files are not there), no network unless allowed (a network namespace with nothing but its own
loopback), no capabilities, an unprivileged uid (65534), and a filesystem of read-only system
directories (`/usr`, the few files of `/etc` programs need, the Python installation it runs
from) plus one writable work directory: the gateway's configuration, ledger and home are not
there. It dies with the gateway (`--die-with-parent`). Its environment is only what its
connector passes (never the gateway's).

Why bubblewrap and not a separate uid: a uid of its own keeps a program out of the gateway's
`/proc/<pid>/environ` and files, but not off the network, and needs a user per program set up
on the host; bubblewrap's namespaces give all three with no setup (root in a container, as
toolkeeper's tests run, or unprivileged user namespaces on a host).

What it is not: a connector. `McpUpstream` (stdio) and `CommandConnector` take one.
"""

from __future__ import annotations

import glob
import os
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import ConfigurationError

__all__ = ["SYSTEM_PATHS", "Sandbox", "bwrap_path"]

SYSTEM_PATHS = (
    "/usr",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/nsswitch.conf",
    "/etc/hosts",
    "/etc/resolv.conf",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/alternatives",
    "/etc/mime.types",
    "/etc/python3*",
)
"""Read-only in every sandbox (those that exist): system programs and libraries and the few
files of `/etc` they read; never `/etc` whole (a gateway's configuration may live there)."""

_TOP_LINKS = ("/bin", "/lib", "/lib32", "/lib64", "/libx32", "/sbin")
SANDBOX_UID = 65534
"""The uid and gid a sandboxed program runs as (nobody)."""


def bwrap_path() -> str:
    """The `bwrap` program.

    Raises:
        ConfigurationError: bubblewrap is not installed.
    """
    found = shutil.which("bwrap")
    if found is None:
        raise ConfigurationError(
            "a sandbox needs bubblewrap: install it (Debian/Ubuntu: apt-get install bubblewrap)"
        )
    return found


@dataclass(frozen=True, kw_only=True, slots=True)
class Sandbox:
    """What a sandboxed program may see and reach."""

    network: bool = False
    """Whether it may use the network (the host's); off: no network at all."""
    read_only: tuple[str, ...] = ()
    """Further paths it may read (a server's own code, its data), besides the system's and
    the Python installation's."""
    writable: str | None = None
    """Its work directory, the one place it may write (and its working directory); None: a
    new empty directory for each run, removed after."""

    def wrap(self, argv: Sequence[str], *, workdir: str) -> list[str]:
        """The bubblewrap command line that runs `argv` in this sandbox, in `workdir` (the
        writable directory; `argv[0]` should be an absolute path).

        Raises:
            ConfigurationError: bubblewrap is not installed.
        """
        out = [bwrap_path(), "--unshare-all", "--die-with-parent", "--cap-drop", "ALL"]
        out += ["--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)]
        if self.network:
            out.append("--share-net")
        # Mounted first: a path bound below under /tmp (a Python installation, a work
        # directory) is then seen on top of the empty /tmp, not hidden by it.
        out += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
        seen: set[str] = set()
        for top in _TOP_LINKS:
            if os.path.islink(top):
                out += ["--symlink", os.readlink(top), top]
            elif os.path.isdir(top):
                out += ["--ro-bind", top, top]
            seen.add(top)
        for path in self._visible(argv):
            if path not in seen:
                seen.add(path)
                out += ["--ro-bind-try", path, path]
        out += ["--bind", workdir, workdir, "--chdir", workdir, "--setenv", "HOME", workdir]
        out += ["--", *argv]
        return out

    def _visible(self, argv: Sequence[str]) -> list[str]:
        paths = [p for pattern in SYSTEM_PATHS for p in sorted(glob.glob(pattern))]
        paths += [sys.prefix, sys.base_prefix, sys.exec_prefix]
        if argv and os.path.isabs(argv[0]):
            # The program file alone, not its folder: a script may sit beside the gateway's
            # configuration.
            paths += [argv[0], str(Path(argv[0]).resolve())]
        paths += [str(Path(p).resolve()) for p in self.read_only]
        kept: list[str] = []
        for path in sorted(dict.fromkeys(paths), key=len):  # a folder before what it holds
            if not any(path == k or path.startswith(k.rstrip("/") + "/") for k in kept):
                kept.append(path)
        return kept
