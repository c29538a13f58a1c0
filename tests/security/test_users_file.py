"""Users from a definitions file, `gear hash-password`, and hash compatibility with RabbitMQ."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import aiormq
import pytest

from gear.broker.node.access import verify_password
from gear.broker.node.definitions import parse_definitions
from tests.backends import RabbitMQ
from tests.conftest import unique

GEAR = [sys.executable, "-c", "from gear.cli.main import app; app()"]


def _gear(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([*GEAR, *args], input=stdin, capture_output=True, text=True, timeout=60)


def test_hash_password_prints_a_usable_hash() -> None:
    done = _gear("hash-password", "--stdin", stdin="correct horse\n")
    assert done.returncode == 0, done.stderr
    assert verify_password(done.stdout.strip(), "correct horse")
    assert "correct horse" not in done.stdout + done.stderr
    empty = _gear("hash-password", "--stdin", stdin="\n")
    assert empty.returncode == 2
    assert "empty password" in empty.stderr


def test_users_file_with_a_plain_password_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "defs.json"
    path.write_text(json.dumps({"users": [{"name": "app", "password": "plain-text"}]}))
    done = _gear("broker", "--port", "0", "--users-file", str(path))
    assert done.returncode == 2
    assert "salted hashes only" in done.stderr
    assert "Traceback" not in done.stderr


async def test_broker_serves_the_users_of_its_file(tmp_path: Path) -> None:
    stored = _gear("hash-password", "--stdin", stdin="app-secret\n").stdout.strip()
    path = tmp_path / "defs.json"
    path.write_text(
        json.dumps(
            {
                "users": [
                    {
                        "name": "app",
                        "password_hash": stored,
                        "hashing_algorithm": "rabbit_password_hashing_sha256",
                    }
                ],
                "vhosts": [{"name": "/"}, {"name": "orders"}],
                "permissions": [
                    {"user": "app", "vhost": "orders", "configure": ".*", "write": ".*", "read": ".*"}
                ],
            }
        )
    )
    proc = subprocess.Popen(  # noqa: ASYNC220 - a child broker that runs until the signal below
        [*GEAR, "broker", "--port", "0", "--users-file", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "listening on amqp://127.0.0.1:" in line, f"no credentials to show for hashed users: {line}"
        port = int(line.split("amqp://127.0.0.1:")[1].split("/")[0])
        conn = await aiormq.connect(f"amqp://app:app-secret@127.0.0.1:{port}/orders")
        await conn.close()
        with pytest.raises(aiormq.exceptions.ProbableAuthenticationError):
            await aiormq.connect(f"amqp://guest:guest@127.0.0.1:{port}/")  # no default user with a file
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=20)


@pytest.mark.rabbitmq
async def test_hashes_are_interchangeable_with_rabbitmq(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    rabbitmq: RabbitMQ = request.getfixturevalue("rabbitmq")
    url, ctl = rabbitmq.url, rabbitmq.ctl
    if ctl is None:
        pytest.skip(f"this RabbitMQ cannot be configured from the tests: {rabbitmq.ctl_note}")
    run: Callable[[Sequence[str]], Any] = ctl
    theirs, ours = unique("gear-hash-r-"), unique("gear-hash-g-")
    made: list[str] = []
    try:
        run(["add_user", theirs, "their-secret"])
        made.append(theirs)
        exported_text = str(run(["-q", "export_definitions", "-"]))  # the node cannot write our tmp dir
        exported = {u.name: u for u in parse_definitions(json.loads(exported_text)).users}
        user = exported[theirs]  # RabbitMQ's own hash verifies here
        assert verify_password(user.password_hash, "their-secret", algorithm=user.algorithm)
        assert not verify_password(user.password_hash, "not-it", algorithm=user.algorithm)

        stored = _gear("hash-password", "--stdin", stdin="our-secret\n").stdout.strip()
        definitions = json.dumps(
            {
                "users": [
                    {
                        "name": ours,
                        "password_hash": stored,
                        "hashing_algorithm": "rabbit_password_hashing_sha256",
                        "tags": [],
                    }
                ]
            }
        )
        made.append(ours)
        with rabbitmq.file_for_node(definitions) as path:  # import_definitions reads it as the node
            run(["import_definitions", path])
        host = url.split("@", 1)[1]
        # Our hash verifies in RabbitMQ: the login passes (the user has no vhost, so open is refused).
        with pytest.raises(aiormq.exceptions.AMQPError) as info:
            await aiormq.connect(f"amqp://{ours}:our-secret@{host}")
        assert not isinstance(info.value, aiormq.exceptions.ProbableAuthenticationError), info.value
        with pytest.raises(aiormq.exceptions.ProbableAuthenticationError):
            await aiormq.connect(f"amqp://{ours}:wrong@{host}")
    finally:
        for name in made:
            run(["delete_user", name])
