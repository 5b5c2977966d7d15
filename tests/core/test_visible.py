"""What a person reads: hidden and reordering characters escaped, JSON still JSON."""

import json
import logging
import sys
import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from toolkeeper.core._visible import _IGNORABLE, VisibleFormatter, visible, visible_json


def test_hidden_characters_are_escaped_and_text_as_written_is_kept() -> None:
    text = "заказы \u202e\u2066\u200b\ufeff\u2060\x1b[2K\r\x85\u2028\U000e0041\ud800\ue000"
    shown = visible(text)
    assert shown == (
        "заказы \\u202e\\u2066\\u200b\\ufeff\\u2060\\u001b[2K\\r\\u0085\\u2028"
        "\\udb40\\udc41\\ud800\\ue000"
    )
    assert visible("a\nb", keep="\n") == "a\nb" and visible("a\nb") == "a\\nb"


@given(st.recursive(st.text(), lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner)))
def test_escaped_json_is_json_of_the_same_value_with_nothing_hidden(value: object) -> None:
    shown = visible_json(value, indent=2)
    assert json.loads(shown) == value
    hidden = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}
    assert all(c == "\n" or unicodedata.category(c) not in hidden for c in shown)
    assert not _IGNORABLE.search(shown)


def test_default_ignorable_characters_of_other_categories_are_escaped_too() -> None:
    """A variation selector, a combining grapheme joiner or a Hangul filler shows as nothing
    (or blank): 'bob' and 'bob' + one of them looked the same to an approver."""
    shown = visible("bob\ufe0f\u034f\u3164\u115f\u180e\U000e0100 ok")
    assert shown == "bob\\ufe0f\\u034f\\u3164\\u115f\\u180e\\udb40\\udd00 ok"
    assert json.loads(visible_json({"to": "bob\ufe0f"})) == {"to": "bob\ufe0f"}


def test_the_console_formatter_escapes_a_log_line_and_keeps_its_traceback_lines() -> None:
    try:
        raise ValueError("x")
    except ValueError:
        record = logging.LogRecord(
            "toolkeeper", logging.ERROR, __file__, 1, "%s failed", ("\x1b[31mtool\u202e",), None
        )
        record.exc_info = sys.exc_info()
    line = VisibleFormatter("%(name)s: %(message)s").format(record)
    assert line.startswith("toolkeeper: \\u001b[31mtool\\u202e failed\nTraceback")
