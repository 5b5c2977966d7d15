"""HTTP operations run as tools, against a real HTTP server on 127.0.0.1."""

import json
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from toolkeeper import CallStatus, Effect, ErrorCode, Keeper, RetryPolicy, ToolCall
from toolkeeper.connectors._http_guard import AddressPolicy
from toolkeeper.connectors._openapi import Operation, openapi_operations, plain_operation
from toolkeeper.connectors.http import HttpParams, HttpSource

from ..conftest import APP
from .http_service import PETS_OPENAPI, Service, running_service

pytestmark = pytest.mark.anyio

LOOPBACK = AddressPolicy.of(allow_networks=["127.0.0.1/32"])
"""The test service's address, and no other private one."""


@pytest.fixture
def service() -> Iterator[Service]:
    with running_service() as running:
        yield running


def _params(service: Service, **options: Any) -> HttpParams:
    options.setdefault("addresses", LOOPBACK)
    return HttpParams(name="pets", base_url=service.url, **options)


@asynccontextmanager
async def _keeper(
    params: HttpParams, operations: Sequence[Operation] | None = None
) -> AsyncIterator[Keeper]:
    ops = openapi_operations(PETS_OPENAPI) if operations is None else operations
    retry = RetryPolicy(initial_interval=0.0, max_attempts=3)
    async with (
        HttpSource(params, ops) as source,
        Keeper(ledger="memory://", principal=APP, retry=retry) as keeper,
    ):
        for tool in source.tools:
            keeper.add(tool)
        yield keeper


def _call(name: str, call_id: str = "c1", **arguments: Any) -> ToolCall:
    return ToolCall(call_id=call_id, name=name, arguments=arguments)


async def test_a_get_operation_fills_path_query_and_header_from_the_arguments(
    service: Service,
) -> None:
    async with _keeper(_params(service)) as keeper:
        call = _call("pets.getPet", petId="a b/c", verbose=True, **{"X-Trace": "t1"})
        result = await keeper.execute(call)
    assert result.status is CallStatus.SUCCEEDED
    assert result.data == {"id": "a%20b%2Fc", "name": "Rex", "query": {"verbose": ["true"]}}
    (seen,) = service.seen
    assert seen.headers["x-trace"] == "t1"
    assert "idempotency-key" not in seen.headers  # a read carries none


async def test_openapi_operations_get_their_effect_from_the_method() -> None:
    async with _keeper(HttpParams(name="pets", base_url="http://api.invalid")) as keeper:
        specs = {s.name: s for s in keeper.catalog.specs()}
    assert (specs["pets.getPet"].effect, specs["pets.getPet"].idempotent) == (
        Effect.READ_ONLY,
        True,
    )
    assert (specs["pets.replacePet"].effect, specs["pets.replacePet"].idempotent) == (
        Effect.WRITE,
        True,
    )
    assert specs["pets.deletePet"].idempotent is True
    assert (specs["pets.addPet"].effect, specs["pets.addPet"].idempotent) == (Effect.WRITE, False)
    assert "pets.upload" not in specs  # a multipart body is no JSON argument
    assert specs["pets.getPet"].permissions == ("pets:getPet",)


def test_an_openapi_3_0_schema_becomes_json_schema_2020_12() -> None:
    ops = {op.name: op for op in openapi_operations(PETS_OPENAPI)}
    pet = ops["getPet"].output_schema
    assert pet is not None
    assert pet["properties"]["tag"]["type"] == ["string", "null"]
    assert pet["properties"]["age"]["exclusiveMinimum"] == 0
    assert "minimum" not in pet["properties"]["age"]
    assert pet["properties"]["friends"]["items"] == {}  # the loop back to Pet, cut
    body = ops["replacePet"].input_schema
    assert body["required"] == ["petId", "body"]
    assert body["additionalProperties"] is False


async def test_a_write_sends_the_calls_idempotency_key_and_reports_its_location(
    service: Service,
) -> None:
    async with _keeper(_params(service)) as keeper:
        first = await keeper.execute(_call("pets.addPet", "w1", body={"name": "Tom"}))
        again = await keeper.execute(_call("pets.addPet", "w1", body={"name": "Tom"}))
        other = await keeper.execute(_call("pets.addPet", "w2", body={"name": "Tom"}))
        record = await keeper.store.get_call("default", "w1")
    assert first.status is CallStatus.SUCCEEDED and first.data == {"name": "Tom"}
    assert first.effect_ref == "/pets/7"
    assert again.replayed  # the ledger answered: the service got two requests, not three
    keys = [s.headers["idempotency-key"] for s in service.seen]
    assert record is not None and keys[0] == record.idempotency_key
    assert len(keys) == 2 and keys[0] != keys[1]
    assert other.status is CallStatus.SUCCEEDED


async def test_an_effect_override_makes_a_get_a_write_with_a_key(service: Service) -> None:
    from toolkeeper.connectors._mcp_params import ToolOverride

    params = _params(service, tools={"getPet": ToolOverride(effect=Effect.WRITE)})
    async with _keeper(params) as keeper:
        result = await keeper.execute(_call("pets.getPet", petId="1"))
    assert result.status is CallStatus.SUCCEEDED
    assert "idempotency-key" in service.seen[0].headers


async def test_a_plain_endpoint_puts_the_other_arguments_in_the_query_or_the_body(
    service: Service,
) -> None:
    schema = {"type": "object", "properties": {"pet": {"type": "string"}, "n": {"type": "integer"}}}
    ops = [
        plain_operation("look", method="GET", path="/pets/{pet}", input_schema=schema),
        plain_operation("put", method="PUT", path="/pets/{pet}", input_schema=schema),
    ]
    async with _keeper(_params(service), ops) as keeper:
        looked = await keeper.execute(_call("pets.look", "p1", pet="3", n=2))
        put = await keeper.execute(_call("pets.put", "p2", pet="3", n=2))
    assert looked.data["query"] == {"n": ["2"]}
    assert put.data == {"id": "3", "n": 2}


async def test_a_path_argument_of_dot_dot_is_refused_before_anything_is_sent(
    service: Service,
) -> None:
    async with _keeper(_params(service)) as keeper:
        result = await keeper.execute(_call("pets.getPet", petId=".."))
    assert result.error is not None and result.error.code is ErrorCode.INVALID_ARGUMENTS
    assert service.seen == []


async def test_secret_headers_reach_the_service_but_never_the_result(service: Service) -> None:
    secret = "sk-live-0123456789abcdef"
    params = _params(
        service,
        headers={"Authorization": f"Bearer {secret}"},
        include=None,
    )
    op = plain_operation("echo", method="GET", path="/echo-headers")
    async with _keeper(params, [op]) as keeper:
        result = await keeper.execute(_call("pets.echo"))
        record = await keeper.store.get_call("default", "c1")
    assert service.seen[0].headers["authorization"] == f"Bearer {secret}"
    assert result.status is CallStatus.SUCCEEDED
    assert secret not in json.dumps(result.data)
    assert record is not None and secret not in json.dumps(record.result)


async def test_secret_headers_are_not_sent_on_a_redirect_to_another_host(
    service: Service,
) -> None:
    secret = "sk-live-0123456789abcdef"
    params = _params(service, headers={"X-Api-Key": secret}, allow_hosts=())
    op = plain_operation("hop", method="GET", path="/redirect")
    elsewhere = f"http://localhost:{service.port}/echo-headers"  # another origin
    addresses = AddressPolicy(allow_private=True)
    async with _keeper(HttpParams(**{**_fields(params), "addresses": addresses}), [op]) as keeper:
        result = await keeper.execute(_call("pets.hop", to=elsewhere))
    assert result.status is CallStatus.SUCCEEDED
    assert service.seen[0].headers["x-api-key"] == secret
    assert "x-api-key" not in service.seen[1].headers


def _fields(params: HttpParams) -> dict[str, Any]:
    return {name: getattr(params, name) for name in HttpParams.__dataclass_fields__}


# SSRF ---------------------------------------------------------------------------------------


async def test_a_name_that_resolves_to_loopback_is_refused_by_default(service: Service) -> None:
    params = HttpParams(name="pets", base_url=f"http://localhost:{service.port}")
    async with _keeper(params) as keeper:
        result = await keeper.execute(_call("pets.getPet", petId="1"))
    assert result.error is not None and result.error.code is ErrorCode.PERMISSION_DENIED
    assert service.seen == []


async def test_a_loopback_address_is_refused_by_default(service: Service) -> None:
    params = HttpParams(name="pets", base_url=service.url)
    async with _keeper(params) as keeper:
        result = await keeper.execute(_call("pets.getPet", petId="1"))
    assert result.error is not None and result.error.code is ErrorCode.PERMISSION_DENIED
    assert not result.error.retryable
    assert service.seen == []


@pytest.mark.parametrize(
    "target",
    ["http://10.1.2.3/admin", "http://169.254.169.254/latest/meta-data/", "http://[::1]:9/"],
)
async def test_a_redirect_to_a_private_address_is_refused(service: Service, target: str) -> None:
    params = _params(service, allow_hosts=())  # any host: the addresses decide
    op = plain_operation("hop", method="GET", path="/redirect")
    async with _keeper(params, [op]) as keeper:
        result = await keeper.execute(_call("pets.hop", to=target))
    assert result.error is not None and result.error.code is ErrorCode.PERMISSION_DENIED
    assert [s.path for s in service.seen] == ["/redirect"]


async def test_a_metadata_address_stays_refused_when_private_ones_are_allowed(
    service: Service,
) -> None:
    params = _params(service, allow_hosts=(), addresses=AddressPolicy(allow_private=True))
    op = plain_operation("hop", method="GET", path="/redirect")
    async with _keeper(params, [op]) as keeper:
        result = await keeper.execute(_call("pets.hop", to="http://169.254.169.254/"))
    assert result.error is not None and result.error.code is ErrorCode.PERMISSION_DENIED


async def test_a_redirect_to_a_host_off_the_list_is_refused(service: Service) -> None:
    op = plain_operation("hop", method="GET", path="/redirect")
    elsewhere = f"http://localhost:{service.port}/pets/1"
    params = _params(service, addresses=AddressPolicy(allow_private=True))
    async with _keeper(params, [op]) as keeper:
        result = await keeper.execute(_call("pets.hop", to=elsewhere))
    assert result.error is not None and result.error.code is ErrorCode.PERMISSION_DENIED
    assert len(service.seen) == 1


def test_ipv4_mapped_and_nat64_forms_of_a_private_address_are_refused() -> None:
    import ipaddress

    policy = AddressPolicy()
    for text in ("::ffff:127.0.0.1", "64:ff9b::a00:1", "0.0.0.0", "100.64.0.1", "fd00::1"):
        assert not policy.permits(ipaddress.ip_address(text)), text
    assert policy.permits(ipaddress.ip_address("93.184.216.34"))


# answers and failures -----------------------------------------------------------------------


async def test_a_429_read_is_retried_after_the_services_wait(service: Service) -> None:
    service.answers["/pets/1"] = [(429, {"retry-after": "0"}, b"")]
    async with _keeper(_params(service)) as keeper:
        result = await keeper.execute(_call("pets.getPet", petId="1"))
    assert result.status is CallStatus.SUCCEEDED and result.attempt == 2


async def test_a_failed_post_is_not_retried(service: Service) -> None:
    service.answers["/pets"] = [(500, {"content-type": "text/plain"}, b"boom")]
    async with _keeper(_params(service)) as keeper:
        result = await keeper.execute(_call("pets.addPet", body={"name": "Tom"}))
    assert result.error is not None and result.error.code is ErrorCode.TOOL_ERROR
    assert result.error.details["status"] == 500
    assert len(service.seen) == 1


async def test_a_400_is_invalid_arguments_with_the_services_words(service: Service) -> None:
    service.answers["/pets/1"] = [(400, {"content-type": "text/plain"}, b"petId is odd")]
    async with _keeper(_params(service)) as keeper:
        result = await keeper.execute(_call("pets.getPet", petId="1"))
    assert result.error is not None and result.error.code is ErrorCode.INVALID_ARGUMENTS
    assert result.error.details["body"] == "petId is odd"


async def test_a_response_over_the_cap_is_not_recorded(service: Service) -> None:
    op = plain_operation("big", method="GET", path="/big")
    async with _keeper(_params(service, max_response_bytes=1000), [op]) as keeper:
        result = await keeper.execute(_call("pets.big"))
    assert result.status is CallStatus.SUCCEEDED
    assert "xxxxxxxxxx" not in json.dumps(result.data)


async def test_a_write_with_no_answer_in_time_ends_with_an_unknown_outcome(
    service: Service,
) -> None:
    from toolkeeper.connectors._mcp_params import ToolOverride

    op = plain_operation("slow", method="POST", path="/slow")
    params = _params(service, tools={"slow": ToolOverride(timeout=0.3)})
    async with _keeper(params, [op]) as keeper:
        with anyio.fail_after(5):
            result = await keeper.execute(_call("pets.slow"))
    assert result.status is CallStatus.UNKNOWN_OUTCOME  # (sent: it may have run)
    assert result.error is not None and result.error.details["cause"] == "TIMEOUT"
    assert len(service.seen) == 1


async def test_a_closed_port_is_upstream_unavailable(service: Service) -> None:
    import socket

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    params = HttpParams(name="pets", base_url=f"http://127.0.0.1:{port}", addresses=LOOPBACK)
    async with _keeper(params) as keeper:
        result = await keeper.execute(_call("pets.getPet", petId="1"))
    assert result.error is not None and result.error.code is ErrorCode.UPSTREAM_UNAVAILABLE


async def test_a_header_argument_with_a_line_break_is_refused_not_injected(
    service: Service,
) -> None:
    async with _keeper(_params(service)) as keeper:
        call = _call("pets.getPet", petId="1", **{"X-Trace": "t\r\nX-Injected: 1"})
        result = await keeper.execute(call)
    assert result.error is not None and result.error.code is ErrorCode.INVALID_ARGUMENTS
    assert service.seen == []


async def test_an_answer_that_is_not_the_json_it_says_is_recorded_as_a_note(
    service: Service,
) -> None:
    service.answers["/pets/1"] = [(200, {"content-type": "application/json"}, b"{not json")]
    async with _keeper(_params(service)) as keeper:
        result = await keeper.execute(_call("pets.getPet", petId="1"))
    assert result.status is CallStatus.SUCCEEDED  # (it ran; its answer cannot be recorded)
    assert "not json" not in json.dumps(result.data)


async def test_a_name_that_does_not_resolve_is_upstream_unavailable() -> None:
    params = HttpParams(name="pets", base_url="http://no-such-host.invalid")
    async with _keeper(params) as keeper:
        result = await keeper.execute(_call("pets.getPet", petId="1"))
    assert result.error is not None and result.error.code is ErrorCode.UPSTREAM_UNAVAILABLE


async def test_concurrent_calls_share_the_sources_connections(service: Service) -> None:
    results: dict[int, Any] = {}
    async with _keeper(_params(service)) as keeper:

        async def one(i: int) -> None:
            results[i] = await keeper.execute(_call("pets.getPet", f"c{i}", petId=str(i)))

        async with anyio.create_task_group() as tg:
            for i in range(20):
                tg.start_soon(one, i)
    assert all(results[i].data["id"] == str(i) for i in range(20))
    assert len(service.seen) == 20


async def test_an_idempotent_write_is_retried_with_the_same_idempotency_key(
    service: Service,
) -> None:
    service.answers["/pets/1"] = [(503, {"retry-after": "0"}, b"")]
    async with _keeper(_params(service)) as keeper:
        result = await keeper.execute(_call("pets.replacePet", petId="1", body={"name": "Rex"}))
    assert result.status is CallStatus.SUCCEEDED and result.attempt == 2
    first, second = (s.headers["idempotency-key"] for s in service.seen)
    assert first == second


def test_an_openapi_3_1_schema_is_kept_as_it_is() -> None:
    schema = {"type": ["string", "null"], "exclusiveMinimum": 0, "nullable": True}
    doc = {
        "openapi": "3.1.0",
        "paths": {
            "/things": {
                "get": {
                    "parameters": [{"name": "q", "in": "query", "schema": schema}],
                    "responses": {"200": {"content": {"application/json": {"schema": schema}}}},
                }
            }
        },
    }
    (op,) = openapi_operations(doc)
    assert op.name == "get_things"  # (no operationId: method and path)
    assert op.input_schema["properties"]["q"] == schema
    assert op.output_schema == schema
