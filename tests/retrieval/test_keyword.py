import pytest

from toolkeeper.retrieval.keyword import KeywordIndex, normalize
from toolkeeper.retrieval.text import ToolText

pytest.importorskip("tantivy")


def _text(name: str, description: str) -> ToolText:
    return ToolText(name=name, description=description, parameters="", extra="")


def test_normalize_splits_identifiers_and_drops_query_syntax() -> None:
    assert normalize('getUserID AND "x" (y:z)') == "get user id getuserid and x y z"


def test_search_sees_additions_replacements_and_removals_at_once() -> None:
    index = KeywordIndex()
    index.upsert("a", _text("send_email", "Send an email message"))
    index.upsert("b", _text("get_weather", "Current weather for a city"))
    assert [k for k, _ in index.search("weather in Paris", 5)] == ["b"]
    index.upsert("b", _text("get_stock", "Stock price of a company"))
    assert index.search("weather in Paris", 5) == []
    index.remove("a")
    assert index.search("email", 5) == []
    assert len(index) == 1


def test_search_scores_only_allowed_keys() -> None:
    index = KeywordIndex()
    index.upsert("open", _text("list_files", "List the files"))
    index.upsert("secret", _text("list_files_admin", "List the files of every user"))
    hits = index.search("list the files of every user", 5, allowed={"open"})
    assert [k for k, _ in hits] == ["open"]
    assert index.search("files", 5, allowed=set()) == []


def test_an_allowed_set_naming_keys_the_index_no_longer_holds_still_restricts() -> None:
    # Taken before "gone" and "left" were removed: as many names as the index holds.
    index = KeywordIndex()
    for key in ("open", "gone", "left"):
        index.upsert(key, _text(f"list_{key}", "List the files"))
    allowed = {"open", "gone", "left"}
    index.remove("gone")
    index.remove("left")
    index.upsert("secret", _text("list_files_admin", "List the files of every user"))
    hits = index.search("list the files of every user", 5, allowed=allowed)
    assert [k for k, _ in hits] == ["open"]
