"""Unsafe exposure is 0 by construction: a forbidden tool never shows, on any path."""

import json
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import Field

from toolkeeper.core.errors import ErrorCode
from toolkeeper.core.states import CallStatus
from toolkeeper.core.values import Principal, ToolCall
from toolkeeper.keeper import Keeper
from toolkeeper.observe.redact import REDACTED
from toolkeeper.retrieval.embed import HashingEmbedder
from toolkeeper.retrieval.fusion import FusionConfig
from toolkeeper.retrieval.meta import meta_specs, meta_tools, summary
from toolkeeper.retrieval.selector import Selector
from toolkeeper.testing import MemoryAuditSink, MemoryStore

from ..conftest import APP, open_files

pytest.importorskip("tantivy")

WORDS = ["refund", "order", "delete", "user", "account", "invoice", "send", "report", "wire"]
USER = Principal(id="u", tenant="acme", environment="prod", grants=frozenset({"tools:call"}))


def _forbidden_fields(reason: str) -> dict[str, Any]:
    return {
        "permissions": {"permissions": ["payments:admin"]},
        "tenant": {"tenants": ["other-tenant"]},
        "environment": {"environments": ["dev"]},
        "disconnected": {},
    }[reason]


async def _keeper_with(query: str, reason: str) -> tuple[Keeper, Selector]:
    keeper = Keeper(principal=APP, ledger="memory://")

    def forbidden_tool(note: str = "") -> str:
        return "ran"

    def harmless_tool(note: str = "") -> str:
        return "ok"

    keeper.add_function(
        forbidden_tool,
        name="forbidden_tool",
        description=query,
        effect="read_only",
        **_forbidden_fields(reason),
    )
    keeper.add_function(
        harmless_tool, name="harmless_tool", description="Show the weather", effect="read_only"
    )
    if reason == "disconnected":
        tool = keeper.catalog.get("forbidden_tool")
        assert tool is not None
        keeper.add(replace(tool, spec=replace(tool.spec, source="crm")))
    selector = Selector.for_catalog(
        keeper.catalog,
        embedder=HashingEmbedder(),
        config=FusionConfig(abstain_below=None),
        connected=(lambda source: source != "crm") if reason == "disconnected" else None,
    )
    for tool in meta_tools(selector, keeper.execute):
        keeper.add(tool)
    return keeper, selector


def _call(name: str, arguments: dict[str, Any], n: int) -> ToolCall:
    return ToolCall(call_id=f"c{n}", name=name, arguments=arguments, principal=USER)


@pytest.mark.anyio
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=6),
    reason=st.sampled_from(["permissions", "tenant", "environment", "disconnected"]),
)
async def test_forbidden_tools_never_appear_on_any_path(words: list[str], reason: str) -> None:
    query = " ".join(words)
    keeper, selector = await _keeper_with(query, reason)
    async with keeper:
        direct = selector.select(query, principal=USER, k=10, abstain=False)
        assert "forbidden_tool" not in direct.names
        assert all(d["name"] != "forbidden_tool" for d in direct.to("anthropic"))

        found = await keeper.execute(_call("search_tools", {"query": query, "k": 20}, 1))
        assert found.ok
        assert "forbidden_tool" not in {t["name"] for t in found.data["tools"]}

        details = await keeper.execute(
            _call("get_tool_details", {"names": ["forbidden_tool", "harmless_tool"]}, 2)
        )
        assert details.ok
        assert [t["name"] for t in details.data["tools"]] == ["harmless_tool"]
        assert details.data["unknown"] == ["forbidden_tool"]
        assert query not in str(details.data)

        called = await keeper.execute(
            _call("call_tool", {"name": "forbidden_tool", "arguments": {}}, 3)
        )
        assert not called.ok
        assert called.data is None
        assert "ran" not in str(called.data)


@pytest.mark.anyio
async def test_call_tool_runs_allowed_tools_through_the_executor() -> None:
    keeper, _ = await _keeper_with("refund the order", "permissions")
    async with keeper:
        result = await keeper.execute(
            _call("call_tool", {"name": "harmless_tool", "arguments": {"note": "x"}}, 1)
        )
        assert result.ok
        assert result.data == "ok"
        nested = await keeper.execute(_call("call_tool", {"name": "call_tool", "arguments": {}}, 2))
        assert not nested.ok


@pytest.mark.anyio
async def test_details_of_a_name_asked_twice_come_once() -> None:
    keeper, _ = await _keeper_with("refund the order", "permissions")
    async with keeper:
        names = ["harmless_tool", "harmless_tool", "nope", "nope"]
        details = await keeper.execute(_call("get_tool_details", {"names": names}, 1))
    assert [t["name"] for t in details.data["tools"]] == ["harmless_tool"]
    assert details.data["unknown"] == ["nope"]


@pytest.mark.anyio
async def test_call_tool_itself_needs_its_permission() -> None:
    keeper, _ = await _keeper_with("refund the order", "permissions")
    stranger = Principal(id="s", tenant="acme", environment="prod")
    async with keeper:
        result = await keeper.execute(
            ToolCall(
                call_id="c1",
                name="call_tool",
                arguments={"name": "harmless_tool", "arguments": {}},
                principal=stranger,
            )
        )
        assert result.error is not None
        assert result.error.code == "UNKNOWN_TOOL"  # (it may not see call_tool either)


def test_meta_tools_are_small_enough_to_start_with() -> None:
    from toolkeeper.retrieval.tokens import count_tokens, tool_definition_json

    assert sum(count_tokens(tool_definition_json(s)) for s in meta_specs()) < 600


def test_summaries_keep_the_first_sentence() -> None:
    assert summary("Get a thing. Then more.") == "Get a thing."
    assert len(summary("x" * 500)) == 120


@pytest.mark.anyio
async def test_keeper_selects_and_discovers_with_the_bundled_model(model_cache: Path) -> None:
    pytest.importorskip("onnxruntime")
    keeper = Keeper(principal=APP, ledger="memory://")

    def get_weather(city: str) -> str:
        """Current weather for a city."""
        return f"sunny in {city}"

    def delete_account(user_id: str) -> str:
        """Delete a user account for good."""
        return "deleted"

    keeper.add_function(get_weather, effect="read_only")
    keeper.add_function(delete_account, effect="destructive")
    selection = keeper.select("what is the weather in Lisbon?", principal=USER, k=2)
    assert selection.names == ("get_weather",)
    assert selection.to("anthropic")[0]["name"] == "get_weather"
    keeper.enable_discovery()
    assert "call_tool" not in keeper.select("call a tool", principal=USER, k=5).names
    async with keeper:
        found = await keeper.execute(_call("search_tools", {"query": "weather in Lisbon"}, 1))
        assert [t["name"] for t in found.data["tools"]] == ["get_weather"]
        result = await keeper.execute(
            _call("call_tool", {"name": "get_weather", "arguments": {"city": "Lisbon"}}, 2)
        )
        assert result.data == "sunny in Lisbon"
    assert (model_cache / "embeddings.sqlite").exists()


@pytest.mark.anyio
async def test_a_destructive_tool_behind_call_tool_runs_once_approved() -> None:
    keeper = Keeper(principal=APP, ledger="memory://")
    refunded: list[str] = []

    @keeper.tool(effect="destructive", permissions=["orders:refund"])
    async def refund(order: str) -> str:
        refunded.append(order)
        return f"refunded {order}"

    agent = Principal(id="agent", grants=frozenset({"orders:*", "tools:call"}))
    keeper.enable_discovery()
    call = ToolCall(
        call_id="r1",
        name="call_tool",
        arguments={"name": "refund", "arguments": {"order": "A-1"}},
        principal=agent,
    )
    async with keeper:
        asked = await keeper.execute(call)
        assert asked.approval_id is not None and asked.error is not None
        assert asked.error.code == "APPROVAL_REQUIRED"
        await keeper.approvals.approve(asked.approval_id, by="ops")
        ran = await keeper.execute(call)
        again = await keeper.execute(call)
    assert ran.ok and ran.data == "refunded A-1" and ran.approval_id == asked.approval_id
    assert again.replayed and refunded == ["A-1"]


def test_discovery_refuses_to_take_the_name_of_a_users_tool() -> None:
    from toolkeeper.core.errors import ConfigurationError

    keeper = Keeper(principal=APP, ledger="memory://")

    @keeper.tool(effect="read_only")
    async def search_tools(text: str) -> str:
        """Search the product catalogue."""
        return text

    with pytest.raises(ConfigurationError, match="search_tools"):
        keeper.enable_discovery()
    assert keeper.catalog.get("search_tools").spec.input_schema["required"] == ["text"]  # type: ignore[union-attr]


def test_a_meta_tool_that_replaces_an_indexed_tool_leaves_no_stale_entry() -> None:
    keeper = Keeper(principal=APP, ledger="memory://")

    @keeper.tool(effect="read_only")
    async def call_tool(text: str) -> str:
        """Call the customer on the phone."""
        return text

    selector = Selector.for_catalog(keeper.catalog, embedder=HashingEmbedder())
    assert selector.select("call the customer", k=1, abstain=False).names == ("call_tool",)
    for tool in meta_tools(selector, keeper.execute):
        keeper.add(tool)
    assert "call_tool" not in selector.select("call the customer", k=3, abstain=False).names
    selector.close()


def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny in {city}"


@pytest.fixture
def weather_keepers(model_cache: Path) -> Any:
    """Makes keepers with `get_weather`, whose selectors use the bundled model (vectors
    cached under `tmp_path`); closes them after the test."""
    pytest.importorskip("onnxruntime")
    made: list[Keeper] = []

    def make(**options: Any) -> Keeper:
        keeper = Keeper(principal=APP, ledger="memory://", **options)
        keeper.add_function(get_weather, effect="read_only")
        made.append(keeper)
        return keeper

    yield make
    for keeper in made:
        keeper.close_sync()


def test_first_selections_on_two_threads_build_one_index(
    weather_keepers: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    keeper = weather_keepers()
    built: list[object] = []
    default = Selector.default

    def counting(*args: Any, **kwargs: Any) -> Selector:
        built.append(args)
        return default(*args, **kwargs)

    monkeypatch.setattr(Selector, "default", counting)
    start = threading.Barrier(2)

    def first_select() -> None:
        start.wait()
        keeper.select("weather in Lisbon", principal=USER)

    threads = [threading.Thread(target=first_select) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(built) == 1


def test_a_keeper_selects_with_the_configuration_it_is_given(weather_keepers: Any) -> None:
    kept = weather_keepers()
    never = weather_keepers(selection=FusionConfig(abstain_below=None))
    query = "translate this poem into Latin"
    assert kept.select(query, principal=USER).abstained
    assert never.select(query, principal=USER).names == ("get_weather",)


@pytest.mark.anyio
async def test_a_call_tool_result_answers_under_the_name_the_model_called(
    weather_keepers: Any,
) -> None:
    # Gemini pairs a functionResponse with its functionCall by name: answered as the inner
    # tool, the model's call_tool went unanswered.
    from toolkeeper.dialects import Gemini

    keeper = weather_keepers()
    keeper.enable_discovery()
    tools = keeper.catalog.specs()
    arguments = {"name": "get_weather", "arguments": {"city": "Lisbon"}}
    response = {
        "responseId": "r1",
        "candidates": [
            {"content": {"parts": [{"functionCall": {"name": "call_tool", "args": arguments}}]}}
        ],
    }
    [call] = Gemini().parse(response, tools=tools)
    async with keeper:
        result = await keeper.execute(msgspec.structs.replace(call, principal=USER))
    assert result.data == "sunny in Lisbon"
    assert (result.tool, result.metadata["tool"]) == ("call_tool", "get_weather")
    answer = Gemini().format_result(result, tools=tools)["functionResponse"]
    assert answer["name"] == "call_tool"


@pytest.mark.anyio
async def test_call_tool_refuses_a_forbidden_tool_as_one_that_does_not_exist() -> None:
    keeper = Keeper(principal=APP, ledger="memory://")
    selector = Selector.for_catalog(keeper.catalog, embedder=HashingEmbedder())

    @keeper.tool(effect="read_only", permissions=["hr:read"])
    def salaries() -> str:
        return "secret"

    for tool in meta_tools(selector, keeper.execute):
        keeper.add(tool)
    async with keeper:
        hidden = await keeper.execute(_call("call_tool", {"name": "salaries", "arguments": {}}, 1))
        missing = await keeper.execute(_call("call_tool", {"name": "nope", "arguments": {}}, 2))
    selector.close()
    for result in (hidden, missing):
        assert result.error is not None and result.error.code.value == "UNKNOWN_TOOL"
    assert hidden.error.message.replace("salaries", "nope") == missing.error.message  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_call_tool_records_no_inner_argument_of_its_own_in_the_clear() -> None:
    """A `call_tool` that does not become its inner call (a tool the principal may not use)
    is recorded as `call_tool`: its record and audit event held the inner tool's arguments,
    a password its schema marks sensitive included, in clear."""
    audit = MemoryAuditSink()
    keeper = Keeper(principal=APP, ledger=MemoryStore(), audit=audit)

    @keeper.tool(effect="write", permissions=["vault:write"])
    def rotate(password: Annotated[str, Field(json_schema_extra={"x-sensitive": True})]) -> str:
        return "rotated"

    keeper.enable_discovery()
    bot = Principal(id="bot", grants=frozenset({"tools:call"}))
    arguments = {"name": "rotate", "arguments": {"password": "sk-SECRET-123"}}
    async with keeper:
        result = await keeper.execute(
            ToolCall(call_id="c1", name="call_tool", arguments=arguments, principal=bot)
        )
        [record] = await keeper.store.list_calls()
    assert result.error is not None and result.error.code is ErrorCode.UNKNOWN_TOOL
    assert record.arguments == {"name": "rotate", "arguments": REDACTED}
    stored = json.dumps(msgspec.to_builtins(record), default=str)
    stored += json.dumps(msgspec.to_builtins(list(audit.events)), default=str)
    assert "sk-SECRET-123" not in stored


def test_a_closed_keeper_never_selects_a_tool_as_it_was_before_a_change(
    weather_keepers: Any,
) -> None:
    # Closing stopped the index from following the catalog, but it still answered: a tool
    # changed afterwards to need a grant the principal lacks was still selected for it.
    import anyio

    from toolkeeper.core.errors import ConfigurationError

    keeper = weather_keepers()
    assert keeper.select("weather in Lisbon", principal=USER).names == ("get_weather",)
    anyio.run(keeper.aclose)
    keeper.add_function(get_weather, effect="read_only", permissions=["weather:admin"])
    with pytest.raises(ConfigurationError):
        keeper.select("weather in Lisbon", principal=USER)
    with pytest.raises(ConfigurationError):
        keeper.selector.allowed(USER)
    unbuilt = weather_keepers()
    anyio.run(unbuilt.aclose)
    with pytest.raises(ConfigurationError):  # (a selector made now would never be closed)
        unbuilt.select("weather in Lisbon", principal=USER)


@pytest.mark.anyio
async def test_a_search_that_finds_no_tool_says_none_fits_even_when_never_abstaining() -> None:
    # With `abstain_below=None`, a principal who may use no tool was told
    # {"tools": [], "no_tool_fits": false}.
    keeper = Keeper(principal=APP, ledger="memory://")

    def list_salaries() -> str:
        """List salaries of the team."""
        return "secret"

    keeper.add_function(list_salaries, effect="read_only", permissions=["hr:read"])
    config = FusionConfig(abstain_below=None)
    selector = Selector.for_catalog(keeper.catalog, embedder=HashingEmbedder(), config=config)
    for tool in meta_tools(selector, keeper.execute):
        keeper.add(tool)
    async with keeper:
        found = await keeper.execute(_call("search_tools", {"query": "list salaries"}, 1))
    assert found.data == {"tools": [], "no_tool_fits": True}
    selector.close()


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="lists open files in /proc")
def test_close_sync_closes_the_index_of_a_script_that_only_selected(
    weather_keepers: Any, tmp_path: Any
) -> None:
    # A script that selected without ever executing kept the vector cache open (and the
    # index following the catalog) after close_sync, which closed only what execute_sync
    # had opened.
    keeper = weather_keepers()
    assert keeper.select("weather in Lisbon", principal=USER).names == ("get_weather",)
    cache = str(tmp_path / "embeddings.sqlite")
    assert cache in open_files()
    keeper.close_sync()
    assert cache not in open_files()
    keeper.close_sync()  # (idempotent)
    assert keeper.select("weather in Lisbon", principal=USER).names == ("get_weather",)


@pytest.mark.anyio
async def test_call_tool_refuses_arguments_nested_too_deep_to_parse(weather_keepers: Any) -> None:
    # Unwrapping `call_tool` parsed its JSON text and let the RecursionError out of
    # `execute`, which never raises for bad input (the pipeline refuses such text).
    keeper = weather_keepers()
    keeper.enable_discovery()
    deep = "[" * 100_000 + "]" * 100_000
    arguments = '{"name": "get_weather", "arguments": {"city": ' + deep + "}}"
    async with keeper:
        result = await keeper.execute(
            ToolCall(call_id="c1", name="call_tool", arguments=arguments, principal=USER)
        )
        [record] = await keeper.store.list_calls()
    assert result.error is not None and result.error.code is ErrorCode.INVALID_ARGUMENTS
    assert record.status is CallStatus.REJECTED


def test_discovery_searches_again_after_close_sync_closed_the_index(weather_keepers: Any) -> None:
    # The meta-tools kept the index `close_sync` closed: a script that went on after it
    # (a later `select` builds a new index) was told search_tools "failed with an internal
    # error" at every search.
    keeper = weather_keepers()
    keeper.enable_discovery()
    keeper.close_sync()
    found = keeper.execute_sync(_call("search_tools", {"query": "weather in Lisbon"}, 1))
    details = keeper.execute_sync(_call("get_tool_details", {"names": ["get_weather"]}, 2))
    assert [t["name"] for t in found.data["tools"]] == ["get_weather"]
    assert [t["name"] for t in details.data["tools"]] == ["get_weather"]


@pytest.mark.anyio
async def test_a_standalone_call_tool_passes_on_what_the_inner_refusal_details() -> None:
    # Added by hand (not through `enable_discovery`), the discovery tools run the inner call
    # themselves: the model must still see which arguments were wrong, and which approval
    # request to ask for, not only the inner code.
    keeper = Keeper(ledger="memory://", principal=USER)

    @keeper.tool(effect="read_only")
    async def lookup_order(order_id: int) -> str:
        """Look an order up."""
        return f"order {order_id}"

    @keeper.tool(effect="destructive", permissions=["tools:call"])
    async def delete_order(order_id: int) -> str:
        """Delete an order."""
        return "deleted"

    selector = Selector.for_catalog(keeper.catalog, embedder=HashingEmbedder())
    for tool in meta_tools(selector, keeper.execute):
        keeper.add(tool)
    async with keeper:
        wrong = await keeper.execute(
            _call("call_tool", {"name": "lookup_order", "arguments": {"order_id": "x"}}, 1)
        )
        held = await keeper.execute(
            _call("call_tool", {"name": "delete_order", "arguments": {"order_id": 7}}, 2)
        )
        pending = await keeper.approvals.pending()
    assert wrong.error is not None and wrong.error.details["code"] == "INVALID_ARGUMENTS"
    assert [v["pointer"] for v in wrong.error.details["violations"]] == ["/order_id"]
    assert held.error is not None and held.error.details["code"] == "APPROVAL_REQUIRED"
    assert [p.id for p in pending] == [held.error.details["approval_id"]]
    selector.close()
