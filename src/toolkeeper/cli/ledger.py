"""`toolkeeper ledger list|unknown|settle`: read the ledger of calls, and settle the unknown.

`list` shows calls, newest first, filtered by state, task and time (`--since`, `--before`),
a page at a time (`--limit`, then the `--cursor` it prints). `unknown` shows the calls whose
outcome is not known (their process died while they ran) and that a person, or the tool's own
status check (`keeper.reconcile()`), must settle: it first marks the abandoned RUNNING calls
UNKNOWN_OUTCOME, as opening a keeper does. `settle` records what the person found: the call
took effect (`--succeeded`) or did not (`--failed`).
"""

from __future__ import annotations

import argparse
import datetime as dt
import getpass
import json
import sys
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import anyio

from .._console import count, render_table
from ..core._visible import visible, visible_json
from ..core.errors import ToolkeeperError
from ..core.states import CallStatus
from . import _HELP
from ._common import (
    LIST_LIMIT,
    add_ledger_option,
    existing_ledger,
    ledger_hint,
    ledger_url,
)

if TYPE_CHECKING:
    from ..ledger.base import CallRecord, LedgerStore
    from ..ledger.pages import CallCursor, CallQuery

__all__ = ["register"]

# The ledger's modules are imported in the functions that use them: `--help` needs none.


def _when(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _as_dict(record: CallRecord) -> dict[str, Any]:
    return {
        "task_id": record.task_id,
        "call_id": record.call_id,
        "tool": record.tool,
        "version": record.version,
        "status": record.status.value,
        "attempt": record.attempt,
        "principal": record.principal_id,
        "tenant": record.tenant,
        "arguments": dict(record.arguments),
        "idempotency_key": record.idempotency_key,
        "approval_id": record.approval_id,
        "effect_ref": record.effect_ref,
        "error": None if record.error is None else dict(record.error),
        "result_stored_apart": record.result_ref is not None,
        "owner": record.owner,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "history": [[status.value, at] for status, at in record.history],
    }


def _args(record: CallRecord) -> str:
    return json.dumps(dict(record.arguments), sort_keys=True, ensure_ascii=False)


async def _records(args: argparse.Namespace) -> list[CallRecord]:
    from ..ledger.base import EVERY
    from ..ledger.pages import CallQuery
    from ..ledger.recovery import recover_abandoned

    store = existing_ledger(args)
    await store.open()
    try:
        if args.action == "unknown":
            await recover_abandoned(store)
            return await store.list_calls(statuses=[CallStatus.UNKNOWN_OUTCOME], limit=EVERY)
        query = CallQuery(
            task_id=args.task, since=args.since, before=args.before, after=args.cursor
        )
        statuses = [CallStatus(s) for s in dict.fromkeys(args.status)] if args.status else [None]
        # One more than shown: whether the list was cut (`_print`).
        pages = [
            await _newest(store, replace(query, status=status), args.limit + 1)
            for status in statuses
        ]
        found = [record for page in pages for record in page]
        found.sort(key=lambda r: (r.created_at, r.task_id, r.call_id), reverse=True)
        return found[: args.limit + 1]
    finally:
        await store.aclose()


async def _newest(store: LedgerStore, query: CallQuery, count: int) -> list[CallRecord]:
    """The newest `count` calls `query` selects, read a page at a time."""
    from ..ledger.pages import MAX_PAGE, CallCursor

    found: list[CallRecord] = []
    while len(found) < count:
        want = min(MAX_PAGE, count - len(found))
        page = await store.page_calls(replace(query, limit=want))
        found.extend(page)
        if len(page) < want:
            break
        query = replace(query, after=CallCursor.of(page[-1]))
    return found


def _print(args: argparse.Namespace, records: list[CallRecord]) -> None:
    from ..ledger.pages import CallCursor

    if args.action == "list" and len(records) > args.limit:
        records = records[: args.limit]
        print(
            f"toolkeeper ledger: the newest {args.limit} calls; the older ones: --cursor "
            f"{CallCursor.of(records[-1]).encode()} (or --limit shows more)",
            file=sys.stderr,
        )
    if args.json:
        print(visible_json([_as_dict(r) for r in records], indent=2))
        return
    if not records:
        print("no calls need a decision" if args.action == "unknown" else "no calls")
        return
    if args.action == "unknown":
        print(
            "after finding out, record it: toolkeeper ledger settle TASK CALL "
            "--succeeded|--failed --note TEXT",
            file=sys.stderr,
        )
    if args.action == "unknown":
        headers = ["TASK", "CALL", "TOOL", "ARGUMENTS", "IDEMPOTENCY KEY", "SINCE"]
        rows: list[list[object]] = [
            [r.task_id, r.call_id, r.tool, _args(r), r.idempotency_key, _when(r.updated_at)]
            for r in records
        ]
    else:
        headers = ["TASK", "CALL", "TOOL", "STATUS", "ATTEMPT", "ERROR", "CREATED"]
        rows = [
            [
                r.task_id,
                r.call_id,
                r.tool,
                r.status.value,
                r.attempt,
                "" if r.error is None else r.error.get("code", ""),
                _when(r.created_at),
            ]
            for r in records
        ]
    print(render_table(headers, rows))


async def _settle(args: argparse.Namespace) -> CallRecord:
    from ..keeper import Keeper, default_audit

    store = existing_ledger(args)
    # The keeper finds calls of processes that died (as `unknown` does), settles, and writes
    # the audit event beside a SQLite ledger.
    async with Keeper(ledger=store, audit=default_audit(ledger_url(args), store)) as keeper:
        await keeper.settle(
            args.task_id,
            args.call_id,
            succeeded=args.succeeded,
            by=args.by or getpass.getuser(),
            note=args.note,
            result=getattr(args, "result", None),
        )
        record = await store.get_call(args.task_id, args.call_id)
    assert record is not None
    return record


def _moment(text: str) -> float:
    from ..ledger.pages import moment

    try:
        return moment(text, time.time())
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _cursor(text: str) -> CallCursor:
    from ..ledger.pages import CallCursor

    try:
        return CallCursor.decode(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{exc}: pass the TOKEN a page ended with") from None


def _json_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"--result is not JSON: {exc}") from exc


def _note(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("say what you found: it is recorded with the call")
    return text


def _main(args: argparse.Namespace) -> int:
    if args.action == "settle" and not args.succeeded and hasattr(args, "result"):
        print(
            "toolkeeper ledger: --result is what a call that took effect returned: it goes "
            "with --succeeded, not --failed",
            file=sys.stderr,
        )
        return 2
    try:
        found: CallRecord | list[CallRecord] = (
            anyio.run(_settle, args) if args.action == "settle" else anyio.run(_records, args)
        )
    except (ToolkeeperError, ImportError) as exc:
        print(f"toolkeeper ledger: {ledger_hint(exc)}", file=sys.stderr)
        return 1
    except (KeyError, ValueError) as exc:  # settle: no such call, or nothing to settle
        print(f"toolkeeper ledger: {exc.args[0]}", file=sys.stderr)
        return 1
    if isinstance(found, list):
        _print(args, found)
    elif args.json:
        print(visible_json(_as_dict(found), indent=2))
    else:
        print(visible(f"{found.task_id} {found.call_id} {found.tool}: {found.status.value}"))
    return 0


def register(subparsers: Any) -> None:
    """Add `toolkeeper ledger`."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "ledger",
        help=_HELP["ledger"],
        description="List the calls in a ledger, or those whose outcome a person must decide.",
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser(
        "list",
        help="calls, newest first",
        description="List calls, newest first (by when each was made, the CREATED column, in "
        "UTC), a page at a time: when more are left, it says the --cursor of the next page.",
    )
    listing.add_argument(
        "--status",
        action="append",
        choices=[s.value for s in CallStatus],
        metavar="STATUS",
        help="only calls in this state (repeatable): " + ", ".join(s.value for s in CallStatus),
    )
    listing.add_argument("--task", default=None, help="only calls of this task")
    listing.add_argument(
        "--since",
        type=_moment,
        metavar="TIME",
        help="only calls made at or after TIME: an ISO 8601 time (2026-12-02T07:00:00Z; UTC "
        "when it names no zone), epoch seconds, or a span ago: 90s, 15m, 1h, 2d, 1w",
    )
    listing.add_argument(
        "--before", type=_moment, metavar="TIME", help="only calls made before TIME (as --since)"
    )
    listing.add_argument(
        "--limit", type=count(1), default=LIST_LIMIT, help="at most this many calls"
    )
    listing.add_argument(
        "--cursor",
        type=_cursor,
        metavar="TOKEN",
        help="the calls older than the last one of a page (the command prints TOKEN)",
    )
    unknown = actions.add_parser(
        "unknown", help="calls whose outcome is unknown and must be decided"
    )
    settling = actions.add_parser(
        "settle",
        help="record whether an unknown call took effect",
        description="Record what you found out about a call whose outcome is unknown (listed "
        "by `ledger unknown`): it took effect (--succeeded) or it did not (--failed). The call "
        "is not run; proposed again, it replays what you record.",
    )
    settling.add_argument("task_id", help="the call's task (TASK column of `ledger unknown`)")
    settling.add_argument("call_id", help="the call (CALL column)")
    outcome = settling.add_mutually_exclusive_group(required=True)
    outcome.add_argument("--succeeded", action="store_true", help="it took effect")
    outcome.add_argument(
        "--failed", dest="succeeded", action="store_false", help="it did not take effect"
    )
    settling.add_argument("--note", required=True, type=_note, help="what you found, and how")
    settling.add_argument("--by", default=None, help="who decides (default: your user name)")
    settling.add_argument(
        "--result",
        type=_json_value,
        default=argparse.SUPPRESS,  # absent, as opposed to `--result null`
        help="the call's result as JSON (with --succeeded only)",
    )
    for sub in (listing, unknown, settling):
        add_ledger_option(sub)
        sub.add_argument("--json", action="store_true", help="print JSON instead of a table")
        sub.set_defaults(func=_main)
