import threading
from dataclasses import replace
from pathlib import Path

import pytest

from toolkeeper.catalog.registry import Catalog, Tool
from toolkeeper.core.values import Effect, Principal, ToolSpec
from toolkeeper.retrieval.embed import HashingEmbedder
from toolkeeper.retrieval.fusion import AbstentionModel, FusionConfig
from toolkeeper.retrieval.selector import Selector
from toolkeeper.retrieval.text import QueryContext

from ..conftest import open_files

pytest.importorskip("tantivy")

READER = Principal(id="reader", grants=frozenset({"files:read"}))


class _Noop:
    async def invoke(self, spec: object, arguments: object, ctx: object) -> None:
        return None


def _tool(name: str, description: str, **fields: object) -> Tool:
    spec = ToolSpec(name=name, description=description, effect=Effect.READ_ONLY)
    return Tool(spec=replace(spec, **fields), connector=_Noop())


def _catalog() -> Catalog:
    return Catalog(
        [
            _tool("files.read_text", "Read a text file from the workspace"),
            _tool("weather.get_forecast", "Weather forecast for a city"),
            _tool("mail.send_message", "Send an email message to a person"),
        ]
    )


def _selector(catalog: Catalog, **kwargs: object) -> Selector:
    config = FusionConfig(abstain_below=None)
    return Selector.for_catalog(catalog, embedder=HashingEmbedder(), config=config, **kwargs)


def test_catalog_changes_reach_the_index_without_a_rebuild() -> None:
    catalog = _catalog()
    selector = _selector(catalog)
    catalog.add(_tool("calendar.create_event", "Create a calendar event with attendees"))
    assert selector.select("create a calendar event", principal=READER, k=1).names == (
        "calendar.create_event",
    )
    catalog.add(_tool("calendar.create_event", "Book a meeting room"))
    assert selector.select("book a meeting room", principal=READER, k=1).names == (
        "calendar.create_event",
    )
    assert selector.rank("attendees", allowed=selector.allowed(READER), depth=5).keyword == []
    catalog.remove("calendar.create_event")
    assert "calendar.create_event" not in selector.select("book a meeting room", k=5).names
    assert len(selector) == 3
    selector.close()
    catalog.add(_tool("late.tool", "Added after close"))
    assert len(selector) == 3


def test_permission_changes_update_the_cached_filter() -> None:
    catalog = _catalog()
    selector = _selector(catalog)
    assert "files.read_text" in selector.select("read a text file", principal=READER).names
    catalog.add(_tool("files.read_text", "Read a text file", permissions=("files:admin",)))
    assert "files.read_text" not in selector.select("read a text file", principal=READER).names


def test_tools_of_disconnected_sources_are_never_ranked() -> None:
    catalog = Catalog([_tool("mail.send_message", "Send an email", source="mail-server")])
    connected = {"mail-server": False}
    selector = _selector(catalog, connected=lambda source: connected.get(source, True))
    assert selector.select("send an email", principal=READER).names == ()
    connected["mail-server"] = True
    assert selector.select("send an email", principal=READER).names == ("mail.send_message",)


def test_selector_abstains_when_the_best_match_is_weak() -> None:
    selector = Selector(embedder=HashingEmbedder(), config=FusionConfig(abstain_below=0.5))
    selector.upsert_many(t.spec for t in _catalog())
    weak = selector.select("translate this poem into latin", principal=READER)
    assert weak.abstained
    assert weak.names == ()
    strong = selector.select("weather forecast for a city", principal=READER)
    assert not strong.abstained
    assert strong.names[0] == "weather.get_forecast"
    assert not selector.select("translate this poem", principal=READER, abstain=False).abstained


def test_a_request_in_a_script_the_embedder_cannot_read_is_weighed_as_such() -> None:
    # A low similarity says little about a request the embedder cannot read: the model's
    # foreign weight decides how much it counts.
    def selector(foreign_weight: float) -> Selector:
        model = AbstentionModel(foreign_weight=foreign_weight)
        config = FusionConfig(abstain_below=0.5, abstention=model)
        out = Selector(embedder=HashingEmbedder(), config=config)
        out.upsert_many(t.spec for t in _catalog())
        return out

    request = "请告诉我北京明天的天气预报"  # Beijing's weather forecast for tomorrow
    ranking = selector(0.0).rank(request, allowed={t.spec.name for t in _catalog()}, depth=5)
    signals = ranking.abstention_signals()
    assert signals is not None and signals[3] == 1.0
    assert selector(0.0).select(request, principal=READER).abstained
    assert not selector(-20.0).select(request, principal=READER).abstained
    english = "the weather forecast for Beijing tomorrow"
    assert selector(-20.0).select(english, principal=READER).confidence == pytest.approx(
        selector(0.0).select(english, principal=READER).confidence
    )


def test_runtime_context_joins_the_query() -> None:
    selector = _selector(_catalog())
    selection = selector.select(
        "do it", principal=READER, k=1, context=QueryContext(plan_step="send an email message")
    )
    assert selection.names == ("mail.send_message",)
    assert "send an email message" in selection.query


def test_runtime_context_still_ranks_after_a_long_message() -> None:
    # The embedding reads the first 512 characters of the query and BM25 the first 8,192:
    # context appended after a longer message reached neither.
    selector = _selector(_catalog())
    context = QueryContext(plan_step="send an email message")
    for message in ("please " * 100, "please " * 200_000):
        selection = selector.select(message, principal=READER, k=1, context=context)
        assert selection.names == ("mail.send_message",)
        assert selection.candidates[0].dense_rank == 1
        assert selection.candidates[0].keyword_rank == 1
        assert len(selection.query) <= 8192
        assert selection.query.endswith("send an email message")
    selector.close()


def test_selection_exports_definitions_and_counts_their_tokens() -> None:
    selector = _selector(_catalog())
    selection = selector.select("weather forecast", principal=READER, k=1)
    exported = selection.to("anthropic")
    assert exported[0]["name"] == "weather_get_forecast"
    assert exported[0]["description"] == "Weather forecast for a city"
    assert selection.tokens() > 10
    # The name had to be rewritten: the report says so, where `to` alone could not.
    report = selection.export("anthropic")
    assert report.value == exported
    assert ("/0/name", "name") in [(loss.pointer, loss.keyword) for loss in report.losses]


def test_lone_surrogates_in_a_query_or_a_tool_text_are_searched_not_fatal() -> None:
    # What a server or client that cut an emoji in half sends: the real tokenizer and the
    # keyword index refuse such strings, so they become U+FFFD before either sees them.
    from toolkeeper.retrieval.embed import MiniLMEmbedder

    catalog = _catalog()
    catalog.add(_tool("chat.post_status", "Post a status update \ud83d", tags=("social\udc00",)))
    selector = Selector.for_catalog(
        catalog, embedder=MiniLMEmbedder(), config=FusionConfig(abstain_below=None)
    )
    try:
        found = selector.select("post a status update \ud83d", principal=READER, k=1).names
        context = QueryContext(plan_step="send \udc00 mail")
        mail = selector.select("email", principal=READER, k=1, context=context).names
    finally:
        selector.close()
    assert found == ("chat.post_status",)
    assert mail == ("mail.send_message",)


def test_k_below_one_is_a_programming_error() -> None:
    selector = _selector(_catalog())
    for k in (0, -1, 2.5, "3", True):
        with pytest.raises(ValueError, match="k must be a whole number of at least 1"):
            selector.select("read a file", principal=READER, k=k)  # type: ignore[arg-type]
    selector.close()


def test_a_query_that_is_not_text_is_a_type_error() -> None:
    selector = _selector(_catalog())
    for query in (None, 3, b"read a file", ["read a file"]):
        with pytest.raises(TypeError, match="query must be a str"):
            selector.select(query, principal=READER)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="context must be a QueryContext"):
        selector.select("read", principal=READER, context="github")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="application must be a str"):
        QueryContext(application=3)  # type: ignore[arg-type]
    selector.close()


def test_keyword_only_selection_answers_a_matching_request_and_abstains_on_none() -> None:
    # Without an embedder there is no similarity to weigh: a keyword match is taken to fit.
    selector = Selector(embedder=None, config=FusionConfig(abstain_below=0.5))
    selector.upsert_many(t.spec for t in _catalog())
    found = selector.select("get the weather forecast for a city", principal=READER)
    nothing = selector.select("translate this poem into latin", principal=READER)
    assert found.names[:1] == ("weather.get_forecast",) and not found.abstained
    assert nothing.names == () and nothing.abstained
    selector.close()


def test_words_in_other_scripts_are_searched_as_words() -> None:
    # Letters outside ASCII were dropped ("hôtel" became "h tel", Japanese became nothing).
    catalog = _catalog()
    catalog.add(_tool("travel.book_hotel", "Réserver une chambre d'hôtel à Paris"))
    catalog.add(_tool("travel.book_ryokan", "旅館 予約"))
    selector = Selector.for_catalog(catalog, embedder=None, config=FusionConfig(abstain_below=None))
    hotel = selector.select("réserver un hôtel", principal=READER, k=1).names
    ryokan = selector.select("予約", principal=READER, k=1).names
    selector.close()
    assert hotel == ("travel.book_hotel",)
    assert ryokan == ("travel.book_ryokan",)


def test_a_chinese_request_finds_the_tool_its_words_describe_inside_longer_text() -> None:
    catalog = _catalog()
    catalog.add(_tool("cn.weather_now", "查询中国城市的实时天气情况，包括温度和湿度"))
    catalog.add(_tool("cn.train_tickets", "查询12306火车票余票信息"))
    catalog.add(_tool("cn.stock_quote", "获取A股实时行情数据"))
    selector = Selector.for_catalog(catalog, embedder=None, config=FusionConfig(abstain_below=None))
    weather = selector.select("查询北京天气", principal=READER, k=1).names
    tickets = selector.select("明天去上海的火车票还有吗", principal=READER, k=1).names
    selector.close()
    assert weather == ("cn.weather_now",)
    assert tickets == ("cn.train_tickets",)


class _FailingOnce(HashingEmbedder):
    """The embedding model failing once, on demand (a model file gone, out of memory)."""

    fail = False

    def embed(self, texts):  # type: ignore[no-untyped-def]
        if self.fail:
            self.fail = False
            raise RuntimeError("the model could not run")
        return super().embed(texts)


def test_a_change_that_fails_to_index_never_leaves_the_old_definition_searchable(
    caplog: pytest.LogCaptureFixture,
) -> None:
    catalog = _catalog()
    embedder = _FailingOnce()
    selector = Selector.for_catalog(
        catalog, embedder=embedder, config=FusionConfig(abstain_below=None)
    )
    catalog.add(_tool("hr.list_salaries", "List employee salaries for a team"))
    assert "hr.list_salaries" in selector.select("employee salaries", principal=READER).names
    embedder.fail = True  # the tightened version cannot be embedded
    catalog.add(
        _tool("hr.list_salaries", "List employee salaries of a team", permissions=("hr:salaries",))
    )
    assert catalog.get("hr.list_salaries").spec.permissions == ("hr:salaries",)  # type: ignore[union-attr]
    assert "could not be indexed" in caplog.text
    assert selector.get("hr.list_salaries") is None
    assert "hr.list_salaries" not in selector.allowed(READER)
    assert "hr.list_salaries" not in selector.select("employee salaries", principal=READER).names
    # Registered again, it is found again, by whoever may use it.
    hr = Principal(id="hr", grants=frozenset({"hr:salaries"}))
    catalog.add(
        _tool("hr.list_salaries", "List employee salaries of a team", permissions=("hr:salaries",))
    )
    assert "hr.list_salaries" in selector.select("employee salaries", principal=hr).names
    assert "hr.list_salaries" not in selector.select("employee salaries", principal=READER).names


def test_changes_on_one_thread_and_selections_on_others_keep_the_index_whole() -> None:
    catalog = _catalog()
    selector = _selector(catalog)
    errors: list[BaseException] = []
    stop = threading.Event()

    def select() -> None:
        while not stop.is_set():
            try:
                selector.select("employee salaries of a team", principal=READER, k=3)
            except BaseException as exc:
                errors.append(exc)
                return

    readers = [threading.Thread(target=select) for _ in range(2)]
    for thread in readers:
        thread.start()
    try:
        for i in range(30):
            catalog.add(_tool(f"hr.tool_{i % 7}", f"List employee salaries, version {i}"))
            if i % 3 == 0:
                catalog.remove(f"hr.tool_{(i + 3) % 7}")
    finally:
        stop.set()
        for thread in readers:
            thread.join()
    assert errors == []
    names = {spec.name for spec in catalog.specs()}
    assert set(selector.allowed(READER)) == names
    assert {n for n, _ in selector.rank("employee", allowed=names, depth=50).keyword} <= names


class _Paused(HashingEmbedder):
    """Holds its first embedding until told to go: a first index of 10,000 tools takes
    seconds, during which other threads go on changing the catalog."""

    def __init__(self) -> None:
        super().__init__()
        self.embedding = threading.Event()
        self.go = threading.Event()

    def embed(self, texts):  # type: ignore[no-untyped-def]
        if not self.embedding.is_set():
            self.embedding.set()
            assert self.go.wait(10)
        return super().embed(texts)


def test_catalog_changes_made_while_the_index_is_built_are_not_lost() -> None:
    catalog = _catalog()
    catalog.add(_tool("hr.list_salaries", "List employee salaries for a team"))
    embedder = _Paused()
    built: list[Selector] = []
    builder = threading.Thread(
        target=lambda: built.append(
            Selector.for_catalog(
                catalog, embedder=embedder, config=FusionConfig(abstain_below=None)
            )
        )
    )
    builder.start()
    assert embedder.embedding.wait(10)
    # Meanwhile (an MCP upstream listing its tools again, say):
    changer = threading.Thread(
        target=lambda: (
            catalog.add(
                _tool("hr.list_salaries", "List salaries of a team", permissions=("hr:salaries",))
            ),
            catalog.remove("weather.get_forecast"),
            catalog.add(_tool("calendar.create_event", "Create a calendar event")),
        )
    )
    changer.start()
    embedder.go.set()
    builder.join(10)
    changer.join(10)
    [selector] = built
    assert selector.allowed(Principal(id="admin", grants=frozenset({"*"}))) == {
        "files.read_text",
        "mail.send_message",
        "hr.list_salaries",
        "calendar.create_event",
    }
    assert "hr.list_salaries" not in selector.allowed(READER)
    assert selector.select("create a calendar event", principal=READER, k=1).names == (
        "calendar.create_event",
    )


def test_changes_of_one_tool_on_two_threads_leave_the_index_as_the_catalog_ends() -> None:
    catalog = _catalog()
    catalog.add(_tool("hr.list_salaries", "List employee salaries for a team"))
    held, go = threading.Event(), threading.Event()

    def slow(event: object) -> None:
        # Another listener, or a thread switch: the first change reaches the selector last.
        if threading.current_thread().name == "first":
            held.set()
            assert go.wait(10)

    catalog.subscribe(slow)
    selector = _selector(catalog)
    first = threading.Thread(
        name="first",
        target=lambda: catalog.add(_tool("hr.list_salaries", "List salaries of a team")),
    )
    first.start()
    assert held.wait(10)
    catalog.add(_tool("hr.list_salaries", "List salaries of a team", permissions=("hr:salaries",)))
    go.set()
    first.join(10)
    assert selector.get("hr.list_salaries") is catalog.get("hr.list_salaries").spec  # type: ignore[union-attr]
    assert "hr.list_salaries" not in selector.allowed(READER)
    assert "hr.list_salaries" not in selector.select("list salaries", principal=READER).names


def test_rank_with_an_allowed_set_taken_before_tools_left_ranks_nothing_outside_it() -> None:
    catalog = _catalog()
    catalog.add(_tool("hr.list_salaries", "List employee salaries", permissions=("hr:salaries",)))
    selector = _selector(catalog)
    allowed = selector.allowed(READER)
    catalog.remove("weather.get_forecast")
    catalog.remove("mail.send_message")
    ranking = selector.rank("list employee salaries", allowed=allowed, depth=5)
    assert "hr.list_salaries" not in {f.name for f in ranking.fused}


def test_a_huge_k_returns_every_allowed_tool_without_asking_the_index_for_more() -> None:
    selector = _selector(_catalog())
    for k in (2**40, 2**64):
        assert len(selector.select("read a file", principal=READER, k=k).names) == 3


def test_a_selections_calls_map_back_to_the_tools_it_exported_for_its_principal() -> None:
    # `orders.get` is exported to OpenAI as `orders_get`, the name of another tool (a
    # destructive one): only the list the names went out in maps them back right.
    catalog = Catalog(
        [
            _tool("orders.get", "Get an order by its id", permissions=("files:read",)),
            _tool("orders_get", "Purge every order", effect=Effect.DESTRUCTIVE),
        ]
    )
    selector = _selector(catalog)
    selection = selector.select("get the order by id", principal=READER, k=1)
    assert selection.names == ("orders.get",)
    assert [t["function"]["name"] for t in selection.to("openai_chat")] == ["orders_get"]
    message = {
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "orders_get", "arguments": '{"id": "7"}'},
            }
        ]
    }
    [call] = selection.parse("openai_chat", message, task_id="t1")
    assert (call.name, call.principal, call.task_id) == ("orders.get", READER, "t1")


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
def test_the_default_selector_closes_the_embedding_cache_it_opened(tmp_path: Path) -> None:
    """`Keeper.aclose` closes its selector, whose vector cache (a SQLite file) stayed open
    until the garbage collector found it: a process making keepers held their files."""
    pytest.importorskip("onnxruntime")
    cache = tmp_path / "vectors.sqlite"
    selector = Selector.default(_catalog(), cache=cache)
    assert str(cache) in open_files()
    selector.close()
    selector.close()  # (idempotent)
    assert str(cache) not in open_files()


def test_k_of_any_integer_type_is_a_whole_number() -> None:
    # `k=np.int64(2)` (a count computed with numpy) was refused as "not a whole number".
    np = pytest.importorskip("numpy")
    selector = _selector(_catalog())
    assert len(selector.select("read a file", principal=READER, k=np.int64(2)).names) == 2
    for k in (np.int64(0), np.float64(2.0), np.bool_(True)):
        with pytest.raises(ValueError, match="k must be a whole number of at least 1"):
            selector.select("read a file", principal=READER, k=k)
    selector.close()


def _orders_catalog() -> Catalog:
    verbs = ("get", "cancel", "refund", "track", "list", "update", "archive", "copy")
    return Catalog(
        [
            _tool(
                f"orders.{verb}_order",
                f"{verb.capitalize()} a customer order: the order id, its items, its status",
            )
            for verb in verbs
        ]
        + [
            _tool("weather.get_forecast", "Weather forecast for a city"),
            _tool("mail.send_message", "Send an email message to a person"),
        ]
    )


REQUEST = (
    "Cancel my order 123 and refund the order, then track the order status of order 456, "
    "get the order items and update the order. "
    "What is the weather forecast for Paris? Send an email message to Bob about it."
)


def test_a_request_for_several_things_gets_a_tool_for_each() -> None:
    selector = _selector(_orders_catalog())
    names = selector.select(REQUEST, k=5).names
    assert {"orders.cancel_order", "weather.get_forecast", "mail.send_message"} <= set(names)
    ranking = selector.rank(REQUEST, allowed=selector.allowed(READER), depth=10)
    assert len(ranking.clauses) == 3
    assert ranking.whole[0].name == ranking.fused[0].name  # the request's own ranking leads
    selector.close()


def test_without_clauses_the_requests_main_topic_crowds_out_the_rest() -> None:
    config = FusionConfig(abstain_below=None, clauses=False)
    selector = Selector.for_catalog(_orders_catalog(), embedder=HashingEmbedder(), config=config)
    assert "weather.get_forecast" not in selector.select(REQUEST, k=5).names
    ranking = selector.rank(REQUEST, allowed=selector.allowed(READER), depth=10)
    assert ranking.clauses == () and ranking.whole == ranking.fused
    selector.close()
