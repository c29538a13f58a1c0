"""What a newcomer types wrong, and what Gear answers (issue 40): every number has a range, in the CLI
and in Python; every usage error is Gear's one line (or, with ``--json``, one JSON document and nothing
on stderr); help lists only what a command takes; user code that fails is reported as the user's."""

from __future__ import annotations

import json
import math
import shlex
import uuid
from pathlib import Path
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner, Result

import gear
from gear.base.limits import MAX_SECONDS
from gear.cli.main import app
from gear.cli.output import ExitCode
from tests.cli.conftest import Invoke, Running
from tests.cli.test_errors import one_line, run_cli

BAD_SECONDS = ["inf", "nan", "1e300", "-1", "0", "abc", "86401"]


def _params() -> list[tuple[str, Any]]:
    """Every (command path, parameter) of the ``gear`` command tree."""
    found: list[tuple[str, Any]] = []

    def walk(command: Any, path: list[str]) -> None:
        found.extend((" ".join(path), param) for param in command.params)
        if hasattr(command, "list_commands"):
            for name in command.list_commands(None):
                walk(command.get_command(None, name), [*path, name])

    walk(typer.main.get_command(app), ["gear"])
    return found


def test_every_numeric_option_has_a_range() -> None:
    numeric = [(path, p) for path, p in _params() if p.bare_type() in ("int", "float")]
    assert len(numeric) > 20, "the walk found the options"
    assert [f"{path} {p.name}" for path, p in numeric if p.min is None or p.max is None] == []
    timeouts = [p for path, p in numeric if p.name == "timeout"]
    assert {p.max for p in timeouts} == {MAX_SECONDS}, "a timeout is at most a day, everywhere"


@pytest.mark.parametrize("value", BAD_SECONDS)
@pytest.mark.parametrize("command", ["call", "gather"])
def test_a_timeout_out_of_range_is_one_line(command: str, value: str) -> None:
    address = "REPO.h1" if command == "call" else "REPO.*"
    line = one_line(run_cli(command, address, "status", "-t", value, "-u", "amqp://h/"), ExitCode.USAGE)
    assert line.startswith("invalid value for --timeout (-t): "), line


@pytest.mark.parametrize(
    ("args", "starts"),
    [
        (["-t", "inf"], "invalid value for --timeout (-t): "),
        (["-d", "{bad"], "invalid value for --data: not valid JSON: "),
        (["-f", "/no/such/file.json"], "invalid value for --data-file: cannot read /no/such/file.json: "),
        (["-u", ""], "invalid value for --url: empty: give a broker URL"),
        (["--nope"], "no such option: --nope (see 'gear call --help')"),
    ],
    ids=["timeout", "data", "data-file", "url", "option"],
)
def test_usage_errors_are_one_line_or_one_json_document(args: list[str], starts: str) -> None:
    line = one_line(run_cli("call", "REPO.h1", "status", *args), ExitCode.USAGE)
    assert line.startswith(starts), line
    result = run_cli("call", "REPO.h1", "status", *args, "--json")
    assert result.exit_code == ExitCode.USAGE
    assert result.stderr == "", "with --json, the document says it all"
    doc = json.loads(result.stdout)
    assert doc == {"ok": False, "error": {"type": "UsageError", "message": line, "exit_code": 2}}


def test_a_missing_argument_names_it_and_the_help() -> None:
    line = one_line(run_cli("send", "p2p", "REPO"), ExitCode.USAGE)
    assert line == "missing argument 'HOST' (see 'gear send p2p --help')"


FORMS = ("REPO.host2", "CTRL (", "CTRL.*", "*.*")  # CTRL ( : the stateless form, as the help lists it


def test_help_lists_only_the_addresses_a_command_takes() -> None:
    def arguments(*command: str) -> str:
        text = run_cli(*command, "--help").stdout
        return " ".join(text.split("Arguments:")[1].split("Options:")[0].split())

    call, gather, cast = arguments("call"), arguments("gather"), arguments("cast")
    assert [form in call for form in FORMS] == [True, True, False, False]
    assert [form in gather for form in FORMS] == [False, False, True, True]
    assert [form in cast for form in FORMS] == [True, True, True, True]


@pytest.mark.parametrize(
    ("command", "usage"),
    [
        (["send", "p2p"], "gear send p2p [OPTIONS] {TYPE} {HOST} {METHOD}"),
        (["call"], "gear call [OPTIONS] {ADDRESS} {METHOD}"),
        (["topology"], "gear topology [OPTIONS] {TYPE} [HOST]"),
    ],
)
def test_usage_lines_spell_every_argument_alike(command: list[str], usage: str) -> None:
    assert run_cli(*command, "--help").stdout.splitlines()[0] == f"Usage: {usage}"


# -- against the test broker ---------------------------------------------------------------------


def test_a_budget_that_runs_out_is_a_timeout_not_a_lost_connection(gear_cli: Invoke, slow: Any) -> None:
    """-t 0.001: the broker is fine, the budget ran out (it used to say "no connection", exit 3)."""
    line = one_line(gear_cli("call", slow.address, "status", "-t", "0.001"), ExitCode.TIMEOUT)
    assert line == f"'status' on {slow.address!r} got no reply within 0.001s"


def test_a_remote_error_with_json_prints_the_document_alone(gear_cli: Invoke, slow: Any) -> None:
    result = gear_cli("call", slow.address, "boom", "--json")
    assert result.exit_code == ExitCode.REMOTE
    assert result.stderr == ""
    error = json.loads(result.stdout)["error"]
    assert (error["remote_type"], error["exit_code"]) == ("KeyError", ExitCode.REMOTE)


def test_a_gather_nobody_answered_with_json_says_so_in_the_document(
    gear_cli: Invoke, running: Running
) -> None:
    result = gear_cli(
        "gather", f"{running.names.repo}.*", "status", "--expected", "99", "-t", "0.3", "--json"
    )
    assert result.exit_code == ExitCode.TIMEOUT
    assert result.stderr == ""
    doc = json.loads(result.stdout)
    assert doc["ok"] is False
    assert doc["error"]["exit_code"] == ExitCode.TIMEOUT
    assert len(doc["replies"]) == len(running.system.repos)


# -- the same ranges in Python -------------------------------------------------------------------


@pytest.mark.parametrize("value", [math.inf, math.nan, 1e300, -1.0, 0, 10**400, True, "5"], ids=repr)
async def test_the_sdk_refuses_a_timeout_out_of_range(value: Any) -> None:
    client = gear.Service.client(url="amqp://127.0.0.1:1/")
    with pytest.raises(gear.ConfigurationError, match=r"^timeout must be"):
        await client.rpc.call("REPO.h1", "status", timeout=value)
    with pytest.raises(gear.ConfigurationError, match=r"^timeout must be"):
        await client.rpc.gather("REPO.*", "status", timeout=value)
    with pytest.raises(gear.ConfigurationError, match=r"^retry_budget must be"):
        await client.rpc.cast("REPO.*", "status", retry_budget=value)


@pytest.mark.parametrize("value", [math.inf, math.nan, 1e300])
def test_the_blocking_api_refuses_it_too(value: float) -> None:
    client = gear.Service.client(url="amqp://127.0.0.1:1/")
    with pytest.raises(gear.ConfigurationError, match=r"^timeout must be"):
        client.rpc.sync.call("REPO.h1", "status", timeout=value)
    with pytest.raises(gear.ConfigurationError, match=r"^retry_budget must be"):
        client.rpc.sync.cast("REPO.h1", "status", retry_budget=value)


@pytest.mark.parametrize("value", ["inf", "nan", "1e300"])
def test_settings_refuse_endless_numbers(value: str) -> None:
    with pytest.raises(gear.ConfigurationError, match=r"^timeout \(GEAR_TIMEOUT\): "):
        gear.Service("WEB", timeout=value)


def test_every_numeric_setting_has_a_finite_range() -> None:
    unbounded = []
    for name, field in gear.Settings.model_fields.items():
        kinds = str(field.annotation)
        if "int" not in kinds and "float" not in kinds:
            continue
        limits = {type(m).__name__ for m in field.metadata}
        if not ({"Gt", "Ge"} & limits and {"Lt", "Le"} & limits):
            unbounded.append(name)
    assert unbounded == []


@pytest.mark.parametrize(
    "options", [{"port": 70000}, {"port": -1}, {"handshake_timeout": math.inf}, {"heartbeat": 10**6}], ids=str
)
def test_the_broker_refuses_numbers_out_of_range(options: dict[str, Any]) -> None:
    from gear.broker import Broker

    (name,) = options
    with pytest.raises(ValueError, match=rf"^{name} must be a number from "):
        Broker(**options)


def test_a_bad_payload_error_names_the_field_in_python() -> None:
    details = {"errors": [{"loc": ["value"], "msg": "Field required", "type": "missing"}]}
    exc = gear.errors.remote_error_from_wire("BadPayload", "invalid payload for 'put': 1 error(s)", details)
    assert isinstance(exc, gear.BadPayloadError)
    assert str(exc) == "BadPayload: invalid payload for 'put': 1 error(s) (value: Field required)"
    assert exc.message == "invalid payload for 'put': 1 error(s)"


# -- the demo's lines, the user's modules --------------------------------------------------------


@pytest.mark.parametrize(
    ("urls", "line"),
    [
        (["amqp://rabbit:5672/"], "export GEAR_URL=amqp://rabbit:5672/"),
        (["amqp://a/", "amqp://b/"], "export GEAR_URL=amqp://a/,amqp://b/"),
        (
            ["amqp://u:secret@rabbit/"],
            "# export GEAR_URL=<the --url you gave> (not printed here: it holds a password)",
        ),
    ],
)
def test_the_demo_prints_an_export_line_that_pastes(urls: list[str], line: str) -> None:
    from gear.examples.demo import export_line

    assert export_line(urls) == line
    words = shlex.split(line, comments=True)
    assert words in ([], ["export", f"GEAR_URL={','.join(urls)}"]), "a shell runs it as printed"
    assert not {"secret", "***"} & set(line.split())


def _module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str) -> str:
    """A module of the user's in the working directory; its (unique) name."""
    name = f"user_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.chdir(tmp_path)
    return name


@pytest.mark.parametrize(
    ("source", "target", "expected"),
    [
        ("def f(:\n    pass\n", "svc", "importing '{m}' raised SyntaxError: invalid syntax ({m}.py, line 1)"),
        (
            "import gear\n\nraise RuntimeError('no config')\n",
            "svc",
            "importing '{m}' raised RuntimeError: no config ({m}.py, line 3)",
        ),
        (
            "import json_nope_xyz\n",
            "svc",
            "importing '{m}' raised ModuleNotFoundError: No module named 'json_nope_xyz' ({m}.py, line 1)",
        ),
        (
            "def make():\n    raise ValueError('no port given')\n",
            "make",
            "calling {m}:make raised ValueError: no port given ({m}.py, line 2)",
        ),
    ],
    ids=["syntax", "import", "dependency", "factory"],
)
@pytest.mark.parametrize("command", [["serve"], ["contract", "export"]], ids=" ".join)
def test_the_users_own_error_is_one_line_with_where(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    clean_env: pytest.MonkeyPatch,
    command: list[str],
    source: str,
    target: str,
    expected: str,
) -> None:
    name = _module(tmp_path, monkeypatch, source)
    url = ["-u", "amqp://127.0.0.1:1/"] if command == ["serve"] else []
    result: Result = CliRunner().invoke(app, [*command, f"{name}:{target}", *url])
    line = one_line(result, ExitCode.USAGE)
    assert line == expected.format(m=name)
    assert "a bug" not in result.output


def test_contract_export_still_runs_a_good_factory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name = _module(
        tmp_path,
        monkeypatch,
        "import gear\n\ndef make():\n    svc = gear.Service('SHOP', 'h1', url='amqp://127.0.0.1:1/')\n\n"
        "    @svc.handler('ping')\n    async def ping() -> str:\n        return 'pong'\n\n    return svc\n",
    )
    result = CliRunner().invoke(app, ["contract", "export", f"{name}:make"])
    assert result.exit_code == 0, result.output
    assert "ping" in json.loads(result.stdout)["x-gear"]["methods"]
