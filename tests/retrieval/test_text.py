import pytest

from toolkeeper.core.values import ToolSpec
from toolkeeper.retrieval.text import (
    MAX_CLAUSES,
    QueryContext,
    clauses,
    compose_query,
    foreign_share,
    split_identifier,
    tool_text,
)


def test_names_split_on_separators_and_camel_case() -> None:
    assert split_identifier("orders.get_detail") == ["orders", "get", "detail"]
    assert split_identifier("getHTTPResponse2") == ["get", "http", "response", "2"]
    assert split_identifier("math-hypot") == ["math", "hypot"]


def test_chinese_japanese_and_korean_runs_become_overlapping_character_pairs() -> None:
    # Written without spaces, a whole sentence was one word that matched nothing.
    assert split_identifier("查询北京天气") == ["查询", "询北", "北京", "京天", "天气"]
    assert split_identifier("최근뉴스") == ["최근", "근뉴", "뉴스"]
    assert split_identifier("getWeather北京") == ["get", "weather", "北京"]
    assert split_identifier("天") == ["天"]
    assert split_identifier("réserver") == ["réserver"]


def test_tool_text_reads_every_searchable_field() -> None:
    spec = ToolSpec(
        name="weather.getForecast",
        description="Forecast for a city.",
        input_schema={
            "type": "object",
            "properties": {
                "cityName": {"type": "string", "description": "Where to look."},
                "options": {
                    "type": "object",
                    "properties": {"unitSystem": {"type": "string", "description": "Units."}},
                },
            },
        },
        tags=("meteo",),
        aliases=("rainCheck",),
        examples=({"cityName": "Lisbon"},),
        title="Weather forecast",
    )
    text = tool_text(spec)
    assert text.name.startswith("weather get forecast")
    assert "city name" in text.parameters
    assert "Where to look." in text.parameters
    assert "unit system" in text.parameters
    assert "meteo" in text.extra
    assert "rain check" in text.extra
    assert "Lisbon" in text.extra
    assert text.dense.startswith("weather get forecast: Forecast for a city.")


def test_query_composition_appends_context_in_a_fixed_order() -> None:
    context = QueryContext(
        application="github: acme/shop",
        plan_step="open a pull request",
        missing="the branch name",
        recent_tools=("git.createBranch",),
    )
    assert compose_query("ship the fix", context) == (
        "ship the fix open a pull request need the branch name in github: acme/shop "
        "git create branch"
    )
    assert compose_query("  ship the fix ") == "ship the fix"


def test_a_query_cut_to_a_length_cuts_the_message_and_keeps_the_context() -> None:
    context = QueryContext(application="github: acme/shop")
    cut = compose_query("ship the fix " * 10, context, max_chars=40)
    assert cut == "ship the fix ship t in github: acme/shop"
    assert compose_query("ship", context, max_chars=40) == "ship in github: acme/shop"
    # A context longer than the query may be leaves the message about half of it.
    huge = QueryContext(application="x" * 100)
    assert compose_query("ship the fix", huge, max_chars=20) == "ship the in xxxxxxxx"
    assert compose_query("ship the fix " * 10, max_chars=15) == "ship the fix sh"

    blank = QueryContext(application="  ", plan_step="\n", missing=" ", recent_tools=("",))
    assert compose_query("ship the fix", blank) == "ship the fix"
    assert compose_query("ship the fix", QueryContext(missing="", application="")) == (
        "ship the fix"
    )


def test_recent_tools_given_as_one_name_or_a_list_are_tool_names() -> None:
    # A name given as text was iterated: "mail.send" became the hint "m a i l s e n d".
    one = QueryContext(recent_tools="mail.send")  # type: ignore[arg-type]
    assert one.recent_tools == ("mail.send",)
    assert compose_query("x", one) == "x mail send"
    listed = QueryContext(recent_tools=["mail.send"])  # type: ignore[arg-type]
    assert listed.recent_tools == ("mail.send",)
    assert hash(listed) == hash(one)
    # A name that is not text is refused when the context is made, not at selection.
    with pytest.raises(TypeError, match="recent_tools"):
        QueryContext(recent_tools=(1,))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        QueryContext(recent_tools=None)  # type: ignore[arg-type]


def test_a_request_of_several_sentences_has_a_clause_for_each() -> None:
    request = (
        "Track my package TRK123 to Paris. Then update the shipment's weight to 2 kg; "
        "also tell me about the geology of Paris! Thanks."
    )
    assert clauses(request) == [
        "Track my package TRK123 to Paris.",
        "Then update the shipment's weight to 2 kg;",
        "also tell me about the geology of Paris!",
    ]


def test_a_request_of_one_or_two_sentences_has_no_clauses() -> None:
    assert clauses("What is the weather in Paris? Thanks.") == []
    # two sentences are most often one request and a detail of it
    assert clauses("Find the distance from Paris to Rome. Give it in kilometres.") == []
    assert clauses("Read version 2.5 of the report and send it to Bob.") == []
    assert clauses("") == []


def test_only_the_first_clauses_are_kept() -> None:
    request = " ".join(f"Please do task number {i}." for i in range(MAX_CLAUSES + 3))
    parts = clauses(request)
    assert len(parts) == MAX_CLAUSES
    assert parts[0] == "Please do task number 0."


@pytest.mark.parametrize(
    ("text", "share"),
    [
        ("weather in Paris", 0.0),
        ("crème brûlée für Straße, Thời tiết Hà Nội", 0.0),  # accented letters are Latin
        ("广州和北京的天气如何？", 1.0),
        ("Погода в Москве", 1.0),
        ("我想创建一个workspace", 0.4),  # 6 of 15 letters
        ("42 + 7 = ?", 0.0),
        ("", 0.0),
    ],
)
def test_the_foreign_share_counts_letters_outside_the_latin_alphabet(
    text: str, share: float
) -> None:
    assert foreign_share(text) == pytest.approx(share)
