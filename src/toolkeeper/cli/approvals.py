"""`toolkeeper approvals list|show|approve|deny`: decide what waits for a person."""

from __future__ import annotations

import argparse
import datetime as dt
import getpass
import json
import sys
import time
from typing import TYPE_CHECKING, Any

import anyio

from .._console import CELL_WIDTH, count, render_table
from . import _HELP
from ._common import LIST_LIMIT, add_ledger_option, cut, existing_ledger, ledger_hint

if TYPE_CHECKING:
    from ..ledger.base import ApprovalRecord

__all__ = ["register"]

# The runtime's modules are imported in the functions that use them: `--help` needs none.


def _when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _status(record: ApprovalRecord) -> str:
    """Where a request stands now: a pending one past its expiry is expired, though no one
    has written so yet (a listing only reads; a decision on it, or the call, marks it)."""
    from ..ledger.base import ApprovalStatus

    if record.status is ApprovalStatus.PENDING and record.expired(time.time()):
        return ApprovalStatus.EXPIRED.value
    return record.status.value


def _as_dict(record: ApprovalRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "status": _status(record),
        "tool": record.tool,
        "version": record.version,
        "task_id": record.task_id,
        "call_id": record.call_id,
        "principal": record.principal_id,
        "arguments": dict(record.arguments),
        "digest": record.digest,
        "reason": record.reason,
        "created_at": record.created_at,
        "expires_at": record.expires_at,
        "decided_by": record.decided_by,
        "decided_at": record.decided_at,
        "note": record.note,
    }


def _shown(record: ApprovalRecord) -> str:
    """One request whole, for the person deciding: what would run, for whom, and why."""
    from ..core._visible import visible, visible_json
    from ..ledger.base import ApprovalStatus

    status = record.status.value
    expired = record.expires_at is not None and record.expires_at <= time.time()
    if record.status is ApprovalStatus.PENDING and expired:
        status += ", past its expiry: it can no longer be approved"
    # Each value escaped on its own: a line break in a reason or a note must not forge a line.
    lines = [
        f"request    {visible(record.id)} ({status})",
        f"tool       {visible(record.tool)} (version {visible(record.version)})",
        f"principal  {visible(record.principal_id)}",
        f"task       {visible(record.task_id)}",
        f"call       {visible(record.call_id)}",
        f"reason     {visible(record.reason)}",
        f"requested  {_when(record.created_at)} UTC, expires {_when(record.expires_at)} UTC",
    ]
    if record.decided_by is not None:
        note = f": {visible(record.note)}" if record.note else ""
        by = visible(record.decided_by)
        lines.append(f"decided    by {by} at {_when(record.decided_at)} UTC{note}")
    lines.append(f"arguments  (HMAC-SHA256 under the ledger's digest key: {record.digest})")
    lines.append(visible_json(dict(record.arguments), indent=2, sort_keys=True))
    return "\n".join(lines)


def _reason(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("a denial needs a reason: the model is told it")
    return text


def _main(args: argparse.Namespace) -> int:
    from ..core.errors import ToolkeeperError

    try:
        return anyio.run(_run, args)
    except (ToolkeeperError, ImportError) as exc:
        print(f"toolkeeper approvals: {ledger_hint(exc)}", file=sys.stderr)
        return 1


async def _run(args: argparse.Namespace) -> int:
    from ..core._visible import visible, visible_json
    from ..ledger.base import EVERY, ApprovalStatus
    from ..policy.approvals import Approvals

    store = existing_ledger(args)
    await store.open()
    try:
        approvals = Approvals(lambda: store)
        if args.action == "list":
            if args.all:
                records = await store.list_approvals(limit=args.limit + 1)
            else:  # read only (`approvals.pending()` marks the expired ones)
                waiting = await store.list_approvals(status=ApprovalStatus.PENDING, limit=EVERY)
                records = [r for r in waiting if _status(r) == ApprovalStatus.PENDING]
            records = cut(
                records,
                args.limit,
                f"toolkeeper approvals: the first {args.limit} requests, oldest first",
            )
            if args.json:
                print(visible_json([_as_dict(r) for r in records], indent=2))
            elif not records:
                print("no approval requests are pending" if not args.all else "no approvals")
            else:
                rows = [
                    [
                        r.id,
                        _status(r),
                        r.tool,
                        r.principal_id,
                        json.dumps(dict(r.arguments), sort_keys=True, ensure_ascii=False),
                        r.reason,
                        _when(r.expires_at),
                    ]
                    + ([r.decided_by or "", r.note or ""] if args.all else [])
                    for r in records
                ]
                headers = ["ID", "STATUS", "TOOL", "PRINCIPAL", "ARGUMENTS", "REASON", "EXPIRES"]
                if args.all:  # who decided, and why: what a decided request is looked up for
                    headers += ["DECIDED BY", "NOTE"]
                print(render_table(headers, rows))
                if any(len(str(row[4])) > CELL_WIDTH for row in rows):
                    print("(arguments cut; `toolkeeper approvals show ID` shows a request whole)")
            return 0
        if args.action == "show":
            shown = await approvals.get(args.id)
            if shown is None:
                print(f"error: no approval request {args.id!r}", file=sys.stderr)
                return 1
            print(visible_json(_as_dict(shown), indent=2) if args.json else _shown(shown))
            return 0
        by = args.by or getpass.getuser()
        try:
            if args.action == "approve":
                record = await approvals.approve(args.id, by=by, note=args.note)
            else:
                record = await approvals.deny(args.id, by=by, reason=args.reason)
        except KeyError:
            print(f"error: no approval request {args.id!r}", file=sys.stderr)
            return 1
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        if args.json:
            print(visible_json(_as_dict(record), indent=2))
        else:
            print(
                visible(
                    f"{record.id} {record.status.value} by {by}: {record.tool} {record.call_id}"
                )
            )
        return 0
    finally:
        await store.aclose()


def register(subparsers: Any) -> None:
    """Add `approvals` to the command line."""
    parser = subparsers.add_parser("approvals", help=_HELP["approvals"])
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="pending requests (or all with --all)")
    listing.add_argument("--all", action="store_true", help="include decided requests")
    listing.add_argument(
        "--limit", type=count(1), default=LIST_LIMIT, help="at most this many requests"
    )
    show = actions.add_parser("show", help="one request whole, its arguments uncut")
    show.add_argument("id", help="the request (ID column of `approvals list`)")
    approve = actions.add_parser("approve", help="grant one request")
    approve.add_argument("id", help="the request (ID column of `approvals list`)")
    approve.add_argument("--note", default=None, help="why, recorded with the decision")
    deny = actions.add_parser("deny", help="refuse one request")
    deny.add_argument("id", help="the request (ID column of `approvals list`)")
    deny.add_argument("--reason", required=True, type=_reason, help="what the model is told")
    for sub in (listing, show, approve, deny):
        add_ledger_option(sub)
        sub.add_argument("--json", action="store_true", help="machine-readable output")
        if sub in (approve, deny):
            sub.add_argument("--by", default=None, help="who decides (default: your user name)")
        sub.set_defaults(func=_main)
