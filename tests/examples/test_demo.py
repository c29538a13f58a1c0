"""``gear demo``: the scenario as a person sees it, on the embedded broker and on RabbitMQ."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from gear.cli.main import app
from tests.backends import RabbitMQ

SECTIONS = {
    "point-to-point": "'put' was delivered to:",
    "stateless": "'lookup' was delivered to:",
    "multicast": "'reload' was delivered to:",
    "broadcast": "'refresh' was delivered to: all 6 instances, x1 each",
    "errors": "UnroutableError",
    "plain handler": "export 6 keys -> CTRL.ctrl",
    "deadlines": "WEB got RemoteError (CallTimeoutError)",
}


def test_demo_walks_through_every_routing_form() -> None:
    result = CliRunner().invoke(app, ["demo"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "reference broker" in out
    assert "instances: REPO.repo1 REPO.repo2 REPO.repo3 CTRL.ctrl1 CTRL.ctrl2 WEB.web1" in out
    for section, evidence in SECTIONS.items():
        assert section in out, section
        assert evidence in out, evidence
    # p2p: each put went to the REPO its hash picked, and only there.
    assert "put alice  -> REPO.repo1" in out
    # stateless and nested: WEB -> some CTRL -> the owning REPO, with the deadline inherited.
    assert "lookup alice  -> CTRL.ctrl" in out
    assert "-> REPO.repo1: 'tea'" in out
    assert "budget left:" in out
    # multicast: both CTRLs, nobody else.
    assert "'reload' was delivered to: CTRL.ctrl1 x1, CTRL.ctrl2 x1" in out
    assert "UNEXPECTED" not in out
    # errors: each in full, the fields a bad payload lacked included (no line cut at 80 characters)
    assert "put    -> BadPayloadError: invalid payload for 'put': 1 error(s) (value: Field required)" in out
    assert any(line.endswith("(2 attempt(s) returned)") for line in out.splitlines() if "Unroutable" in line)
    assert out.rstrip().splitlines()[-1].startswith("done:")


def test_demo_json_reports_every_check() -> None:
    result = CliRunner().invoke(app, ["demo", "--json", "--repos", "2", "--ctrls", "3"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["ok"] is True
    assert all(doc["checks"].values())
    assert any("CTRL.ctrl3" in line for line in doc["report"])


@pytest.mark.rabbitmq
def test_demo_against_rabbitmq(rabbitmq: RabbitMQ) -> None:
    result = CliRunner().invoke(app, ["demo", "--url", rabbitmq.url])
    assert result.exit_code == 0, result.output
    assert "REPO_demo.repo1" in result.stdout
    assert "UNEXPECTED" not in result.stdout
