from toolkeeper.core.values import ToolSpec
from toolkeeper.retrieval.text import QueryContext, compose_query, split_identifier, tool_text


def test_names_split_on_separators_and_camel_case() -> None:
    assert split_identifier("orders.get_detail") == ["orders", "get", "detail"]
    assert split_identifier("getHTTPResponse2") == ["get", "http", "response", "2"]
    assert split_identifier("math-hypot") == ["math", "hypot"]


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


def test_blank_context_fields_add_nothing_to_the_query() -> None:
    blank = QueryContext(application="  ", plan_step="\n", missing=" ", recent_tools=("",))
    assert compose_query("ship the fix", blank) == "ship the fix"
    assert compose_query("ship the fix", QueryContext(missing="", application="")) == (
        "ship the fix"
    )
