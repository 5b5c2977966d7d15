"""`toolkeeper tools pending|diff|accept|reject`: decide on upstream tools' changed definitions.

An upstream tool's definition is pinned when the gateway first sees it; a change waits here
(`policy.pins`). Decisions are written to the ledger, where every gateway process on it sees
them within its `pins_poll_interval`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import getpass
import sys
from typing import TYPE_CHECKING, Any

import anyio

from .._console import render_table
from . import _HELP
from ._common import add_ledger_option, existing_ledger, ledger_hint

if TYPE_CHECKING:
    from ..ledger.pins import PinRecord

__all__ = ["register"]

# The runtime's modules are imported in the functions that use them: `--help` needs none.


def _when(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _as_dict(record: PinRecord) -> dict[str, Any]:
    return {
        "name": record.name,
        "source": record.source,
        "status": record.status.value,
        "pinned": record.digest,
        "offered": record.offered_digest,
        "findings": [dict(f) for f in record.findings],
        "updated_at": record.updated_at,
        "decided_by": record.decided_by,
        "history": [dict(h) for h in record.history],
    }


def _main(args: argparse.Namespace) -> int:
    from ..core.errors import ToolkeeperError

    try:
        return anyio.run(_run, args)
    except (ToolkeeperError, ImportError) as exc:
        print(f"toolkeeper tools: {ledger_hint(exc)}", file=sys.stderr)
        return 1


async def _run(args: argparse.Namespace) -> int:
    from ..core._visible import visible, visible_json
    from ..policy.pins import Pins

    store = existing_ledger(args)
    await store.open()
    try:
        pins = Pins(store)
        if args.action == "pending":
            records = await pins.pending()
            if args.json:
                print(visible_json([_as_dict(r) for r in records], indent=2))
            elif not records:
                print("no tool definition waits for a decision")
            else:
                rows = [
                    [
                        r.name,
                        r.source,
                        "new tool" if r.digest is None else "changed",
                        (r.offered_digest or "")[:12],
                        ", ".join(sorted({f.get("kind", "") for f in r.findings})) or "-",
                        _when(r.updated_at),
                    ]
                    for r in records
                ]
                headers = ["TOOL", "SOURCE", "WHAT", "OFFERED", "FLAGGED", "SINCE"]
                print(render_table(headers, rows))
            return 0
        try:
            if args.action == "diff":
                record = await pins.get(args.name)
                print(await pins.diff(args.name))
                for finding in record.findings if record is not None else ():
                    flagged = f"flagged {finding.get('kind')} at {finding.get('where') or '/'}"
                    print(visible(f"{flagged}: {finding.get('excerpt')}"))
                return 0
            by = args.by or getpass.getuser()
            decide = pins.accept if args.action == "accept" else pins.reject
            record = await decide(args.name, by=by, digest=args.digest)
        except KeyError:
            print(visible(f"error: no pinned tool {args.name!r}"), file=sys.stderr)
            return 1
        except ValueError as exc:
            print(visible(f"error: {exc}"), file=sys.stderr)
            return 1
        if args.json:
            print(visible_json(_as_dict(record), indent=2))
        else:
            print(visible(f"{record.name} {args.action}ed by {by}: pinned {record.digest}"))
        return 0
    finally:
        await store.aclose()


def register(subparsers: Any) -> None:
    """Add `tools` to the command line."""
    parser = subparsers.add_parser(
        "tools",
        help=_HELP["tools"],
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    pending = actions.add_parser("pending", help="tools whose definition waits for a decision")
    diff = actions.add_parser("diff", help="what changed in a tool's definition")
    accept = actions.add_parser("accept", help="pin the definition a tool offers now")
    reject = actions.add_parser("reject", help="keep a tool's pinned definition")
    for sub in (diff, accept, reject):
        sub.add_argument("name", help="the tool (TOOL column of `tools pending`)")
    for sub in (accept, reject):
        sub.add_argument(
            "--digest",
            default=None,
            help="decide only if this is still the definition offered (OFFERED, or `diff`)",
        )
        sub.add_argument("--by", default=None, help="who decides (default: your user name)")
    for sub in (pending, diff, accept, reject):
        add_ledger_option(sub)
        if sub is not diff:
            sub.add_argument("--json", action="store_true", help="machine-readable output")
        sub.set_defaults(func=_main)
