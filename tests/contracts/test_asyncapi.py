"""AsyncAPI 3.0 documents of contracts and services: what they say (channels for the four address forms,
request/reply operations, payload, reply and error schemas, AMQP bindings), and that the official
AsyncAPI parser (``@asyncapi/parser``, which validates against the AsyncAPI 3.0 JSON Schema of
``@asyncapi/specs``) finds no error in them.

The parser is a Node.js package: ``npm ci`` installs it (pinned by ``asyncapi/package-lock.json``) into
``tests/contracts/asyncapi/node_modules`` the first time; without ``node`` and ``npm`` those tests skip.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any, Protocol

import pytest

import gear
from gear.contract import asyncapi_document
from gear.examples import contracts, ctrl
from gear.examples.models import InstanceStatus, Refresh, StatusQuery
from tests.contracts.shop import Shop

HERE = Path(__file__).parent / "asyncapi"


@pytest.fixture(scope="session")
def validator() -> Path:
    """The directory with ``validate.mjs`` and the parser installed beside it."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("node and npm are needed for the official AsyncAPI parser (apt-get install nodejs npm)")
    if not (HERE / "node_modules" / "@asyncapi" / "parser").is_dir():
        done = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts"],
            cwd=HERE,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, f"npm ci failed:\n{done.stdout}\n{done.stderr}"
    return HERE


def _validate(validator: Path, tmp_path: Path, documents: dict[str, dict[str, Any]]) -> dict[str, Any]:
    files = []
    for name, document in documents.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(document))
        files.append(str(path))
    done = subprocess.run(
        ["node", "validate.mjs", *files], cwd=validator, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    return {Path(file).stem: result for file, result in report.items()}


def _errors(result: dict[str, Any]) -> list[str]:
    return [
        f"{d['code']} at {'/'.join(map(str, d['path']))}: {d['message']}"
        for d in result["diagnostics"]
        if d["severity"] == 0
    ]


class _Untyped(gear.Contract, Protocol):  # no TYPE: addresses get a {type} parameter
    async def ping(self) -> None: ...

    @gear.one_way
    async def poke(self, n: int) -> None: ...


@pytest.mark.slow
@pytest.mark.timeout(900)  # a fresh checkout runs `npm ci` first (the validator fixture), then node
def test_documents_pass_the_official_asyncapi_parser(validator: Path, tmp_path: Path) -> None:
    documents = {
        "repo": asyncapi_document(contracts.Repo),
        "ctrl": asyncapi_document(contracts.Ctrl),
        "instance": asyncapi_document(contracts.Instance, type="WEB"),
        "shop": asyncapi_document(Shop, exchange="shop-exchange"),
        "servers": asyncapi_document(Shop, servers=["amqp://u:pw@rabbit1/prod", "amqps://rabbit2:5671/"]),
        "untyped": asyncapi_document(_Untyped),
        "ctrl_service": asyncapi_document(ctrl.create_service("ctrl1", "amqp://guest:guest@127.0.0.1:1/")),
    }
    broken = copy.deepcopy(documents["shop"])
    broken["operations"]["take.pointToPoint"]["messages"] = [{"$ref": "#/channels/stateless/messages/nope"}]
    broken["channels"]["pointToPoint"]["bindings"]["amqp"]["is"] = "exchange"
    documents["broken"] = broken
    report = _validate(validator, tmp_path, documents)
    for name in documents:
        if name != "broken":
            assert report[name]["valid"], f"{name}: " + "\n".join(_errors(report[name]))
    # the validator does find errors (so a pass above means something)
    assert not report["broken"]["valid"]
    assert len(_errors(report["broken"])) >= 2


def test_the_document_has_the_four_address_forms_and_the_queues() -> None:
    doc = asyncapi_document(contracts.Repo)
    assert doc["asyncapi"] == "3.0.0"
    assert doc["info"]["title"] == "Repo"
    assert doc["info"]["version"] == "1.0.0"
    channels = doc["channels"]
    addresses = {name: channels[name]["address"] for name in channels}
    assert addresses == {
        "pointToPoint": "REPO.{host}",
        "stateless": "REPO",
        "multicast": "REPO.@all",
        "broadcast": "@all.@all",
        "instanceQueue": "REPO.{host}",
        "sharedQueue": "REPO",
        "replies": None,
    }
    exchange = {"name": "gear", "type": "topic", "durable": True, "autoDelete": False, "vhost": "/"}
    for name in ("pointToPoint", "stateless", "multicast", "broadcast", "replies"):
        assert channels[name]["bindings"]["amqp"] == {
            "is": "routingKey",
            "exchange": exchange,
            "bindingVersion": "0.3.0",
        }
    assert channels["instanceQueue"]["bindings"]["amqp"]["queue"]["name"] == "REPO.{host}"
    assert channels["sharedQueue"]["bindings"]["amqp"]["queue"] == {
        "name": "REPO",
        "durable": True,
        "exclusive": False,
        "autoDelete": False,
        "vhost": "/",
    }
    assert channels["pointToPoint"]["parameters"] == {"host": {"description": "the instance's HOST word"}}


def test_calls_have_replies_and_errors_and_one_way_methods_have_none() -> None:
    doc = asyncapi_document(Shop)
    take = doc["operations"]["take.pointToPoint"]
    assert take["action"] == "receive"
    assert take["channel"] == {"$ref": "#/channels/pointToPoint"}
    assert take["messages"] == [{"$ref": "#/channels/pointToPoint/messages/take.request"}]
    assert take["reply"]["address"]["location"] == "$message.header#/reply_to"
    assert take["reply"]["messages"] == [
        {"$ref": "#/channels/replies/messages/take.reply"},
        {"$ref": "#/channels/replies/messages/take.error"},
    ]
    assert take["bindings"]["amqp"] == {
        "cc": ["SHOP.{host}"],
        "mandatory": True,
        "deliveryMode": 1,
        "ack": True,
        "bindingVersion": "0.3.0",
    }
    gather = doc["operations"]["take.multicast"]
    assert gather["messages"] == [{"$ref": "#/channels/multicast/messages/take.gather"}]
    messages = doc["components"]["messages"]
    assert messages["take.request"]["bindings"]["amqp"]["messageType"] == "gear.call"
    assert messages["take.gather"]["bindings"]["amqp"]["messageType"] == "gear.gather"
    assert messages["take.request"]["payload"] == {"$ref": "#/components/schemas/Sku"}
    assert messages["take.request"]["headers"]["properties"]["x-gear-method"]["const"] == "take"
    assert "x-gear-deadline" in messages["take.request"]["headers"]["required"]
    assert messages["take.reply"]["payload"] == {"$ref": "#/components/schemas/Stock"}
    errors = messages["take.error"]["payload"]["anyOf"]
    assert errors == [
        {"$ref": "#/components/schemas/error.OutOfStock"},
        {"$ref": "#/components/schemas/error.Closed"},
        {"$ref": "#/components/schemas/gear.ErrorBody"},
    ]
    schemas = doc["components"]["schemas"]
    out_of_stock = schemas["error.OutOfStock"]
    assert out_of_stock["properties"]["type"]["const"] == "OutOfStock"
    assert out_of_stock["description"] == "Nothing left of that SKU."
    assert out_of_stock["properties"]["details"] == {"$ref": "#/components/schemas/OutOfStockDetails"}
    assert schemas["error.Closed"]["properties"]["details"] == {"type": "object"}
    assert set(schemas["gear.ErrorBody"]["required"]) == {"type"}
    restock = doc["operations"]["restock.broadcast"]
    assert "reply" not in restock
    assert restock["bindings"]["amqp"]["deliveryMode"] == 2
    assert messages["restock.cast"]["bindings"]["amqp"]["messageType"] == "gear.cast"
    assert "x-gear-deadline" not in messages["restock.cast"]["headers"]["properties"]
    assert "payload" not in messages["size.request"]  # no payload parameter
    assert messages["size.reply"]["payload"] == {"type": "integer"}
    assert doc["x-gear"]["methods"]["take"] == {
        "kind": "call",
        "request": {"$ref": "#/components/schemas/Sku"},
        "reply": {"$ref": "#/components/schemas/Stock"},
        "errors": ["Closed", "OutOfStock"],
    }
    assert doc["x-gear"]["methods"]["restock"]["kind"] == "cast"
    assert doc["info"]["version"] == "2.1.0"


def test_a_services_document_covers_its_contracts_and_its_other_handlers() -> None:
    svc = gear.Service("CTRL", "c1", url="amqp://guest:guest@127.0.0.1:1/")
    svc.implement(contracts.Instance, _InstanceHandlers())

    @svc.handler("echo")
    async def echo(payload):  # untyped: any JSON either way
        return payload

    doc = asyncapi_document(svc, exchange="x")
    assert doc["info"]["title"] == "CTRL (Instance)"
    assert sorted(doc["x-gear"]["methods"]) == ["echo", "refresh", "status"]
    assert doc["x-gear"]["methods"]["echo"] == {"kind": "call", "request": {}, "reply": {}, "errors": []}
    assert doc["channels"]["stateless"]["address"] == "CTRL"
    assert doc["x-gear"]["exchange"] == "x"


class _InstanceHandlers:
    async def status(self, query: StatusQuery) -> InstanceStatus:
        raise NotImplementedError

    async def refresh(self, notice: Refresh) -> None:
        return None


def test_what_is_neither_a_contract_nor_a_service_is_refused() -> None:
    with pytest.raises(gear.ConfigurationError, match=r"neither a gear\.Contract nor a gear\.Service"):
        asyncapi_document(object())


def test_the_document_names_its_servers_without_credentials() -> None:
    default = asyncapi_document(Shop)["servers"]
    assert default["broker"]["host"] == "{host}:{port}"
    assert default["broker"]["variables"]["port"]["default"] == "5672"
    assert (default["broker"]["protocol"], default["broker"]["protocolVersion"]) == ("amqp", "0.9.1")
    given = asyncapi_document(Shop, servers=["amqp://u:secret@rabbit1/prod", "amqps://rabbit2/"])["servers"]
    assert given == {
        "broker1": {
            "host": "rabbit1:5672",
            "protocol": "amqp",
            "protocolVersion": "0.9.1",
            "pathname": "/prod",
        },
        "broker2": {"host": "rabbit2:5671", "protocol": "amqps", "protocolVersion": "0.9.1"},
    }
    assert "secret" not in json.dumps(given)
    with pytest.raises(gear.ConfigurationError, match="is not an amqp:// or amqps:// URL"):
        asyncapi_document(Shop, servers=["http://u:secret@rabbit1/"])


def test_a_result_reply_has_no_status_header_and_an_error_reply_requires_it() -> None:
    messages = asyncapi_document(Shop)["components"]["messages"]
    result, error = messages["take.reply"]["headers"], messages["take.error"]["headers"]
    assert "x-gear-status" not in result["properties"]
    assert result["not"]["required"] == ["x-gear-status"]
    assert error["properties"]["x-gear-status"]["const"] == "error"
    assert "x-gear-status" in error["required"]
