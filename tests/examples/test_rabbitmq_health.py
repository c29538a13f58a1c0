"""docker-compose.yml's RabbitMQ health check (``gear/examples/cluster/rabbitmq-health.sh``) logs in
as a Gear client would, shown here against the reference broker; ``test_compose_system.py`` runs it in
the RabbitMQ containers (a guest confined to localhost, a node alone where three are wanted)."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest

from gear.broker import Broker

SCRIPT = Path(__file__).resolve().parents[2] / "gear" / "examples" / "cluster" / "rabbitmq-health.sh"

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="the health check is a bash script")


async def _check(port: int, **env: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        "bash",
        str(SCRIPT),
        env={
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOSTNAME": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(port),
            **env,
        },
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(process.communicate(), timeout=20)
    assert process.returncode is not None
    return process.returncode, output.decode()


async def _check_against(broker: Broker, **env: str) -> tuple[int, str, int]:
    """Run the check against ``broker`` (started for it); returns its exit status, output and the port."""
    await broker.start()
    port = broker.port
    try:
        code, output = await _check(port, **env)
    finally:
        await broker.stop()
    return code, output, port


async def test_a_broker_that_lets_guest_in_is_healthy() -> None:
    code, output, port = await _check_against(Broker(port=0))
    assert (code, output) == (0, f"healthy: 'guest' logs in at 127.0.0.1:{port}\n")


async def test_a_refused_login_is_unhealthy_and_says_why() -> None:
    code, output, port = await _check_against(Broker(port=0), RABBITMQ_DEFAULT_PASS="not-the-password")
    assert code == 1
    assert output.startswith("unhealthy: 403 ACCESS_REFUSED"), output
    assert output.rstrip().endswith(f"(login of 'guest' at 127.0.0.1:{port})")


async def test_a_missing_vhost_is_unhealthy() -> None:
    code, output, _ = await _check_against(Broker(port=0, vhosts=["other"]))
    assert code == 1
    assert output.startswith("unhealthy: 530 NOT_ALLOWED"), output


async def test_a_closed_port_is_unhealthy() -> None:
    _, _, port = await _check_against(Broker(port=0))
    code, output = await _check(port)
    assert code != 0
    assert "Connection refused" in output
