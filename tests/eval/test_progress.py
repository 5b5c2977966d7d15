"""The progress bar is drawn on a terminal, and is one line anywhere else."""

from __future__ import annotations

import io
import os

from toolkeeper.eval.progress import progress


def test_a_bar_is_drawn_on_a_terminal() -> None:
    leader, follower = os.openpty()
    with os.fdopen(follower, "w") as terminal:
        assert list(progress(range(3), total=3, label="queries", stream=terminal)) == [0, 1, 2]
    # One read may return only the first redraw: read until the terminal says it was closed.
    chunks: list[bytes] = []
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # (EIO: the other end is closed and all it wrote was read)
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    shown = b"".join(chunks).decode()
    assert "\rqueries [" in shown and "3/3" in shown


def test_a_file_gets_one_line_at_the_end_and_no_bar() -> None:
    log = io.StringIO()
    assert list(progress(range(3), total=3, label="queries", stream=log)) == [0, 1, 2]
    [line] = log.getvalue().splitlines()
    assert line.startswith("queries: 3/3 in ") and "\r" not in log.getvalue()


def test_nothing_is_written_when_disabled() -> None:
    log = io.StringIO()
    assert list(progress(range(3), total=3, label="queries", enabled=False, stream=log))
    assert log.getvalue() == ""
