import io
import logging
from collections.abc import Sequence
from typing import Any

import pytest

from toolkeeper.retrieval.embed import HashingEmbedder
from toolkeeper.retrieval.progress import SHOWN_FROM, embed_in_steps

np = pytest.importorskip("numpy")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class _Counting(HashingEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[int] = []

    def embed(self, texts: Sequence[str]) -> Any:
        self.calls.append(len(texts))
        return super().embed(texts)


TEXTS = [f"tool number {i} does thing {i % 7}" for i in range(SHOWN_FROM + 44)]


def test_a_terminal_sees_a_bar_that_ends_at_the_total_and_the_rows_are_unchanged() -> None:
    embedder, terminal = _Counting(), _Terminal()
    vectors = embed_in_steps(embedder.embed, TEXTS, stream=terminal)
    assert np.array_equal(vectors, HashingEmbedder().embed(TEXTS))
    assert len(embedder.calls) > 1
    assert f"] {len(TEXTS)}/{len(TEXTS)}" in terminal.getvalue()
    assert terminal.getvalue().endswith(" s\n")


def test_elsewhere_a_log_line_says_when_it_starts_and_ends_and_nothing_is_drawn(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pipe = io.StringIO()
    with caplog.at_level(logging.INFO, logger="toolkeeper"):
        embed_in_steps(HashingEmbedder().embed, TEXTS, stream=pipe)
    assert pipe.getvalue() == ""
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2
    assert f"{len(TEXTS)} texts to embed" in lines[0]
    assert f"{len(TEXTS)} texts embedded in" in lines[1]


def test_a_few_texts_are_embedded_at_once_without_a_word(
    caplog: pytest.LogCaptureFixture,
) -> None:
    embedder, terminal = _Counting(), _Terminal()
    with caplog.at_level(logging.INFO, logger="toolkeeper"):
        embed_in_steps(embedder.embed, TEXTS[:10], stream=terminal)
    assert embedder.calls == [10]
    assert terminal.getvalue() == "" and not caplog.records
