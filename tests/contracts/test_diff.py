"""``gear contract diff``: a table of change pairs, each with the changes (method, where, class) it must
give, then the command itself (human and ``--json`` output, exit codes)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal, Protocol

import pytest
from pydantic import BaseModel, ConfigDict, Field
from typer.testing import CliRunner

import gear
from gear.cli.main import app
from gear.cli.output import ExitCode
from gear.contract import asyncapi_document, diff_documents
from gear.examples.contracts import Repo
from gear.examples.models import InstanceStatus, StatusQuery


class _Forbid(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Q1(_Forbid):
    key: str


class Q1Optional(_Forbid):
    key: str
    note: str | None = None


class Q1Required(_Forbid):
    key: str
    note: str


class QOpen(BaseModel):  # ignores unknown fields
    key: str
    note: str = ""


class QOpenLess(BaseModel):
    key: str


class QShort(_Forbid):
    key: str = Field(max_length=10)


class QLong(_Forbid):
    key: str = Field(max_length=20)


class QInt(_Forbid):
    key: int


class QFloat(_Forbid):
    key: float


class Filter(_Forbid):
    prefix: str = ""


class Nested(_Forbid):
    inner: Q1


class Nested2(_Forbid):
    inner: Q1Required


class Mode1(_Forbid):
    mode: Literal["a", "b"]


class Mode2(_Forbid):
    mode: Literal["a"]


class R(_Forbid):
    key: str
    value: str


class RNullable(_Forbid):
    key: str
    value: str | None


class RLess(_Forbid):
    key: str


class ROpt(_Forbid):
    key: str
    value: str
    note: str | None = None


class RMore(_Forbid):
    key: str
    value: str
    extra: int


class ROpenOld(BaseModel):
    key: str
    value: str


class ROpenNew(BaseModel):
    key: str
    value: str
    extra: int


class Gone(gear.ContractError):
    """The key is gone."""


_B, _C = "breaking", "compatible"


def _contract(body: str, kind: str | None = None) -> Any:
    """A contract class from its body (one method per line; ``@one_way``/``@raises(Gone)`` allowed)."""
    namespace: dict[str, Any] = {**globals(), "Protocol": Protocol, "StatusQuery": StatusQuery}
    namespace["InstanceStatus"] = InstanceStatus
    lines = "\n".join(f"    {line.strip()}" for line in body.strip().splitlines())
    keywords = f", type={kind!r}" if kind else ""
    exec(f"class C(gear.Contract, Protocol{keywords}):\n{lines}\n", namespace)
    return namespace["C"]


GET = "async def get(self, q: {}) -> {}: ..."


def get(request: str = "Q1", reply: str = "R") -> str:
    return GET.format(request, reply)


CASES: list[tuple[str, str, str, list[tuple[str | None, str, str]]]] = [
    ("no change", get(), get(), []),
    ("method added", get(), get() + "\nasync def put(self, q: Q1) -> R: ...", [("put", "method", _C)]),
    ("method removed", get() + "\nasync def put(self, q: Q1) -> R: ...", get(), [("put", "method", _B)]),
    (
        "method renamed",
        get(),
        "async def fetch(self, q: Q1) -> R: ...",
        [("fetch", "method", _C), ("get", "method", _B)],
    ),
    ("required request field added", get("Q1"), get("Q1Required"), [("get", "request.note", _B)]),
    ("optional request field added", get("Q1"), get("Q1Optional"), [("get", "request.note", _C)]),
    ("request field removed, extras refused", get("Q1Optional"), get("Q1"), [("get", "request.note", _B)]),
    ("request field removed, extras ignored", get("QOpen"), get("QOpenLess"), [("get", "request.note", _C)]),
    (
        "request field made required (and not null)",
        get("Q1Optional"),
        get("Q1Required"),
        [("get", "request.note", _B), ("get", "request.note", _B)],
    ),
    ("request string widened", get("QShort"), get("QLong"), [("get", "request.key", _C)]),
    ("request string narrowed", get("QLong"), get("QShort"), [("get", "request.key", _B)]),
    ("request field type changed", get("Q1"), get("QInt"), [("get", "request.key", _B)]),
    ("request int to float", get("QInt"), get("QFloat"), [("get", "request.key", _C)]),
    ("request float to int", get("QFloat"), get("QInt"), [("get", "request.key", _B)]),
    ("request payload type changed", get("Q1"), get("int"), [("get", "request", _B)]),
    ("request enum narrowed", get("Mode1"), get("Mode2"), [("get", "request.mode", _B)]),
    ("request enum widened", get("Mode2"), get("Mode1"), [("get", "request.mode", _C)]),
    ("nested request field added", get("Nested"), get("Nested2"), [("get", "request.inner.note", _B)]),
    ("reply field removed", get(reply="R"), get(reply="RLess"), [("get", "reply.value", _B)]),
    ("optional reply field removed", get(reply="ROpt"), get(reply="R"), [("get", "reply.note", _C)]),
    (
        "reply field added, old callers refuse extras",
        get(reply="R"),
        get(reply="RMore"),
        [("get", "reply.extra", _B)],
    ),
    (
        "reply field added, old callers ignore extras",
        get(reply="ROpenOld"),
        get(reply="ROpenNew"),
        [("get", "reply.extra", _C)],
    ),
    (
        "reply value widened (guarantee narrowed)",
        get(reply="R"),
        get(reply="RNullable"),
        [("get", "reply.value", _B)],
    ),
    ("reply value narrowed", get(reply="RNullable"), get(reply="R"), [("get", "reply.value", _C)]),
    ("reply type changed", get(reply="R"), get(reply="int"), [("get", "reply", _B)]),
    ("reply item type changed", get(reply="list[int]"), get(reply="list[str]"), [("get", "reply", _B)]),
    ("reply made optional", get(reply="int"), get(reply="int | None"), [("get", "reply", _B)]),
    (
        "method made one-way",
        "async def ping(self, n: int) -> int: ...",
        "@gear.one_way\nasync def ping(self, n: int) -> None: ...",
        [("ping", "kind", _B)],
    ),
    (
        "one-way method made a call",
        "@gear.one_way\nasync def ping(self, n: int) -> None: ...",
        "async def ping(self, n: int) -> int: ...",
        [("ping", "kind", _C)],
    ),
    ("declared error added", get(), "@gear.raises(Gone)\n" + get(), [("get", "errors", _B)]),
    ("declared error removed", "@gear.raises(Gone)\n" + get(), get(), [("get", "errors", _C)]),
    (
        "payload added, all fields optional",
        "async def size(self) -> int: ...",
        "async def size(self, f: Filter) -> int: ...",
        [("size", "request", _C)],
    ),
    (
        "payload added, required",
        "async def size(self) -> int: ...",
        "async def size(self, q: Q1) -> int: ...",
        [("size", "request", _B)],
    ),
    (
        "payload removed",
        "async def size(self, q: Q1) -> int: ...",
        "async def size(self) -> int: ...",
        [("size", "request", _C)],
    ),
]


@pytest.mark.parametrize(("old", "new", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_change_gets_its_class(old: str, new: str, expected: list[tuple[str | None, str, str]]) -> None:
    before = asyncapi_document(_contract(old))
    after = asyncapi_document(_contract(new))
    changes = diff_documents(before, after)
    got = sorted((c.method, c.where, c.compatibility.value) for c in changes)
    assert got == sorted(expected), [c.as_dict() for c in changes]


def test_the_type_and_exchange_are_part_of_the_contract() -> None:
    body = get()
    changes = diff_documents(
        asyncapi_document(_contract(body, "STORE")), asyncapi_document(_contract(body, "SHOP"), exchange="e")
    )
    assert [(c.where, c.what, c.old, c.new, c.breaking) for c in changes] == [
        ("type", "type changed", "STORE", "SHOP", True),
        ("exchange", "exchange changed", "gear", "e", True),
    ]


def test_a_document_not_written_by_gear_is_refused() -> None:
    with pytest.raises(gear.ConfigurationError, match="no x-gear part"):
        diff_documents({"asyncapi": "3.0.0"}, asyncapi_document(_contract(get())))


# -- the commands ---------------------------------------------------------------------------------


def _cli(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def _export(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(asyncapi_document(_contract(body), type="SHOP")))
    return path


def test_diff_lists_changes_and_exits_non_zero_on_a_breaking_one(tmp_path: Path) -> None:
    old = _export(tmp_path, "old", get("Q1", "R") + "\nasync def size(self) -> int: ...")
    new = _export(tmp_path, "new", get("Q1Required", "ROpt") + "\nasync def count(self) -> int: ...")
    result = _cli("contract", "diff", str(old), str(new))
    assert result.exit_code == ExitCode.BREAKING, result.output
    assert int(ExitCode.BREAKING) == 11
    lines = [" ".join(line.split()) for line in result.stdout.splitlines()]
    assert "breaking get request.note required request field added (- -> string)" in lines
    assert "compatible get reply.note reply field added (- -> string | null)" not in lines  # R forbids extras
    assert (
        "breaking get reply.note reply field added: old callers refuse unknown fields (- -> string | null)"
        in lines
    )
    assert "breaking size method method removed (or renamed)" in lines
    assert "compatible count method method added" in lines
    assert lines[-1] == "4 change(s): 3 breaking, 1 compatible"
    as_json = _cli("contract", "diff", str(old), str(new), "--json")
    assert as_json.exit_code == 11
    document = json.loads(as_json.stdout)
    assert (document["ok"], document["breaking"], document["compatible"]) == (False, 3, 1)
    assert {
        "class": "breaking",
        "method": "get",
        "where": "request.note",
        "change": "required request field added",
        "old": None,
        "new": "string",
    } in document["changes"]


def test_diff_exits_zero_on_compatible_changes_and_reads_module_objects(tmp_path: Path) -> None:
    old = _export(
        tmp_path, "old", get("Q1") + "\nasync def status(self, query: StatusQuery) -> InstanceStatus: ..."
    )
    result = _cli("contract", "diff", str(old), "gear.examples.contracts:Repo", "--type", "SHOP", "--json")
    document = json.loads(result.stdout)
    assert document["breaking"] > 0  # get's types differ from the example's: a real diff ran
    same = _cli("contract", "diff", "gear.examples.contracts:Repo", "gear.examples.contracts:Repo")
    assert same.exit_code == ExitCode.OK, same.output
    assert same.stdout.strip() == "0 change(s): 0 breaking, 0 compatible"
    grown = _export(tmp_path, "grown", get("Q1") + "\nasync def extra(self) -> int: ...")
    only_added = _cli("contract", "diff", str(_export(tmp_path, "base", get("Q1"))), str(grown))
    assert only_added.exit_code == ExitCode.OK, only_added.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["contract", "diff", "nowhere.json", "gear.examples.contracts:Repo"], "no such file"),
        (["contract", "diff", "gear.examples.nope:Repo", "gear.examples.contracts:Repo"], "cannot import"),
        (
            ["contract", "diff", "gear.examples.models:Item", "gear.examples.contracts:Repo"],
            "is not a gear.Contract",
        ),
        (["contract", "export", "gear.examples.contracts"], "expected module:attr"),
        (["contract", "export", "gear.examples.contracts:Nope"], "has no attribute"),
    ],
)
def test_bad_arguments_are_usage_errors(args: list[str], message: str) -> None:
    result = _cli(*args)
    assert result.exit_code == ExitCode.USAGE, result.output
    assert message in result.output


def test_export_writes_the_document_of_a_contract_or_a_service(tmp_path: Path) -> None:
    out = tmp_path / "repo.json"
    result = _cli(
        "contract", "export", "gear.examples.contracts:Repo", "--format", "asyncapi", "--out", str(out)
    )
    assert result.exit_code == ExitCode.OK, result.output
    assert f"wrote {out}: AsyncAPI 3.0.0, 4 method(s)" in result.output
    document = json.loads(out.read_text())
    assert document == json.loads(json.dumps(asyncapi_document(Repo)))
    printed = _cli("contract", "export", "gear.examples.repo:create_service", "--exchange", "other")
    assert printed.exit_code == ExitCode.OK, printed.output
    served = json.loads(printed.stdout)
    assert sorted(served["x-gear"]["methods"]) == ["get", "put", "refresh", "status"]
    assert served["x-gear"]["exchange"] == "other"
    assert _cli("contract", "export", "--help").exit_code == 0
    assert _cli("contract", "diff", "--help").exit_code == 0
