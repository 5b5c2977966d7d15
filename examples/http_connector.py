"""An HTTP service as tools: its OpenAPI document read by the gateway configuration
(`[http.shop]`), each operation a tool, every call through the keeper's pipeline.

The example starts a small shop API on 127.0.0.1 itself (the standard library's HTTP server,
in a thread), writes a configuration beside its OpenAPI document in a temporary folder, and
calls a read and a write. The write carries the call's idempotency key as `Idempotency-Key`,
and a retry of the same call is answered from the ledger: the shop sees one order.

    python examples/http_connector.py     # needs: pip install "toolkeeper[server]"
"""

from __future__ import annotations

import json
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio

from toolkeeper import ToolCall
from toolkeeper.config import load_config
from toolkeeper.server import build

OPENAPI: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {"title": "shop", "version": "1"},
    "paths": {
        "/products/{sku}": {
            "get": {
                "operationId": "getProduct",
                "description": "One product: its name, price and stock.",
                "parameters": [
                    {"name": "sku", "in": "path", "required": True, "schema": {"type": "string"}}
                ],
                "responses": {"200": {"description": "the product"}},
            }
        },
        "/orders": {
            "post": {
                "operationId": "placeOrder",
                "description": "Order a quantity of one product. Charges the customer.",
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "properties": {
                                    "sku": {"type": "string"},
                                    "quantity": {"type": "integer", "minimum": 1},
                                },
                                "required": ["sku", "quantity"],
                            }
                        }
                    },
                },
                "responses": {"201": {"description": "the order"}},
            }
        },
    },
}

CONFIG = """
[server]
ledger = "memory://"

[http.shop]
base_url = "{base_url}"
openapi = "shop.json"
allow_private = true     # the example's server is on 127.0.0.1 (refused by default)

[principals.app]
token = "app-token-0123456789"
grants = ["shop:*"]
"""

ORDERS: list[dict[str, Any]] = []


class Shop(BaseHTTPRequestHandler):
    def _answer(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        sku = self.path.rsplit("/", 1)[-1]
        self._answer(200, {"sku": sku, "name": "Desk lamp", "price": 24.5, "stock": 12})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        order = {"id": f"o-{len(ORDERS) + 1}", **body, "key": self.headers["Idempotency-Key"]}
        ORDERS.append(order)
        self._answer(201, order, {"Location": f"/orders/{order['id']}"})

    def log_message(self, format: str, *args: Any) -> None:  # (quiet)
        pass


async def run(folder: Path, base_url: str) -> None:
    (folder / "shop.json").write_text(json.dumps(OPENAPI))
    (folder / "toolkeeper.toml").write_text(CONFIG.replace("{base_url}", base_url))
    deployment = build(load_config(folder / "toolkeeper.toml"))
    async with deployment:
        keeper = deployment.keeper
        app = deployment.gateway.principals["app"].principal
        for spec in keeper.visible_tools(app):
            print(f"tool {spec.name}: {spec.effect.value}, idempotent={spec.idempotent}")
        read = ToolCall(
            call_id="c1", name="shop.getProduct", arguments={"sku": "L-7"}, principal=app
        )
        print("getProduct:", (await keeper.execute(read)).data)
        order = ToolCall(
            call_id="c2",
            name="shop.placeOrder",
            arguments={"body": {"sku": "L-7", "quantity": 2}},
            principal=app,
        )
        placed = await keeper.execute(order)
        print("placeOrder:", placed.status.name, "effect_ref:", placed.effect_ref)
        again = await keeper.execute(order)  # a retry of the same call
        print("placeOrder again:", again.status.name, "replayed:", again.replayed)
    print("orders the shop received:", len(ORDERS))
    print("Idempotency-Key sent:", ORDERS[0]["key"] == placed.data["key"])


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Shop)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with tempfile.TemporaryDirectory() as folder:
            anyio.run(run, Path(folder), f"http://127.0.0.1:{server.server_port}")
    finally:
        server.shutdown()


if __name__ == "__main__":
    main()
