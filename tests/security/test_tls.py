"""TLS: the reference broker's amqps listener and the SDK's certificate checks.

RabbitMQ is not covered here: the shared node has no TLS listener, and giving it one means
reconfiguring and restarting its listeners, which the tests must never do to a shared broker.
"""

from __future__ import annotations

import asyncio
import ssl
import subprocess
import sys
from typing import Any

import aiormq
import pytest

import gear
from gear.broker import Broker
from tests.conftest import unique
from tests.security.conftest import CERT_USER
from tests.security.pki import Pki

WAIT = 10.0
GEAR = [sys.executable, "-c", "from gear.cli.main import app; app()"]


def _tls_broker(pki: Pki, **fields: Any) -> Broker:
    return Broker(port=0, tls_cert=str(pki.server_cert), tls_key=str(pki.server_key), **fields)


def _client_context(ca: str, cert: str | None = None, key: str | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=ca)
    if cert:
        context.load_cert_chain(cert, key)
    return context


async def _echo_round_trip(url: str, **settings: Any) -> int:
    type_ = unique("TLS")
    server = gear.Service(type_, "h1", url=url, connect_wait=5, **settings)

    @server.handler("echo")
    async def echo(n: int) -> int:
        return n

    client = gear.Service(unique("WEB"), "w1", url=url, serve=False, connect_wait=5, **settings)
    async with server, client:
        result: int = await client.rpc.call(f"{type_}.h1", "echo", 41, timeout=WAIT)
        return result


async def test_sdk_calls_through_amqps_with_the_ca_it_is_given(pki: Pki) -> None:
    async with _tls_broker(pki) as broker:
        assert broker.url.startswith("amqps://")
        assert await _echo_round_trip(broker.url, tls_ca=str(pki.ca)) == 41
        # the broker knows these connections are encrypted
        async with gear.Service(unique("WEB"), "w2", url=broker.url, serve=False, tls_ca=str(pki.ca)):
            assert [c.tls for c in broker.status().connections] == [True]


async def test_sdk_verifies_by_default_and_refuses_an_unknown_ca(pki: Pki) -> None:
    async with _tls_broker(pki) as broker:
        choices: list[dict[str, Any]] = [{}, {"tls_ca": str(pki.other_ca)}]  # system CAs, then the wrong CA
        for settings in choices:
            svc = gear.Service(unique("WEB"), "w1", url=broker.url, serve=False, connect_wait=0.3, **settings)
            with pytest.raises(gear.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                await svc.start()
        assert broker.status().connections == [], "no AMQP connection may start without a valid certificate"


async def test_sdk_refuses_an_expired_broker_certificate(pki: Pki) -> None:
    async with Broker(port=0, tls_cert=str(pki.expired_cert), tls_key=str(pki.expired_key)) as broker:
        svc = gear.Service(
            unique("WEB"), "w1", url=broker.url, serve=False, connect_wait=0.3, tls_ca=str(pki.ca)
        )
        with pytest.raises(gear.ConnectError, match="certificate has expired"):
            await svc.start()


async def test_sdk_checks_the_host_name(pki: Pki) -> None:
    async with _tls_broker(pki, host="127.0.0.2") as broker:  # the certificate names 127.0.0.1/localhost
        svc = gear.Service(
            unique("WEB"), "w1", url=broker.url, serve=False, connect_wait=0.3, tls_ca=str(pki.ca)
        )
        with pytest.raises(gear.ConnectError, match="IP address mismatch"):
            await svc.start()
        assert await _echo_round_trip(broker.url, tls_ca=str(pki.ca), tls_verify=False) == 41


async def test_settings_come_from_gear_tls_env(pki: Pki, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEAR_TLS_CA", str(pki.ca))
    monkeypatch.setenv("GEAR_TLS_CERT", str(pki.client_cert))
    monkeypatch.setenv("GEAR_TLS_KEY", str(pki.client_key))
    settings = gear.Settings(url="amqps://guest:guest@127.0.0.1:5671/")
    assert (settings.tls_ca, settings.tls_cert, settings.tls_key) == tuple(
        str(p) for p in (pki.ca, pki.client_cert, pki.client_key)
    )
    assert settings.tls_verify is True


def test_unusable_tls_files_are_a_configuration_error(pki: Pki) -> None:
    with pytest.raises(gear.ConfigurationError, match="cannot use TLS CA file"):
        gear.Service("WEB", "w1", url="amqps://127.0.0.1/", tls_ca="/nonexistent/ca.pem")
    with pytest.raises(gear.ConfigurationError, match="cannot use TLS client certificate"):
        gear.Service("WEB", "w1", url="amqps://127.0.0.1/", tls_cert=str(pki.ca), tls_key=str(pki.server_key))
    with pytest.raises(gear.ConfigurationError, match="tls_key is set without tls_cert"):
        gear.Service("WEB", "w1", url="amqps://127.0.0.1/", tls_key=str(pki.client_key))


async def test_client_certificate_logs_in_with_external(pki: Pki) -> None:
    async with _tls_broker(
        pki, tls_ca=str(pki.ca), users={"guest": "guest", CERT_USER: "unused-pw"}
    ) as broker:
        url = f"amqps://127.0.0.1:{broker.port}/?auth=external"
        conn = await aiormq.connect(
            url, context=_client_context(str(pki.ca), str(pki.client_cert), str(pki.client_key))
        )
        try:
            assert [c.user for c in broker.status().connections] == [CERT_USER]
        finally:
            await conn.close()
        # The SDK presents its certificate from Settings (aiormq picks EXTERNAL from ?auth=external).
        assert (
            await _echo_round_trip(
                url, tls_ca=str(pki.ca), tls_cert=str(pki.client_cert), tls_key=str(pki.client_key)
            )
            == 41
        )


async def test_external_is_offered_only_with_a_client_certificate(pki: Pki) -> None:
    async with _tls_broker(pki, tls_ca=str(pki.ca)) as broker:
        url = f"amqps://127.0.0.1:{broker.port}/?auth=external"
        with pytest.raises(aiormq.exceptions.AuthenticationError):
            await aiormq.connect(url, context=_client_context(str(pki.ca)))
        assert broker.status().failed_logins == 0, "the client gave up before start-ok"


async def test_required_client_certificate(pki: Pki) -> None:
    async with _tls_broker(pki, tls_ca=str(pki.ca), tls_require_client_cert=True) as broker:
        no_cert = _client_context(str(pki.ca))
        with pytest.raises((ConnectionError, ssl.SSLError, aiormq.exceptions.AMQPConnectionError)):
            await asyncio.wait_for(aiormq.connect(broker.url, context=no_cert), WAIT)
        conn = await aiormq.connect(
            broker.url, context=_client_context(str(pki.ca), str(pki.client_cert), str(pki.client_key))
        )
        await conn.close()


async def test_plain_amqp_client_on_the_tls_port_gets_nowhere(pki: Pki) -> None:
    async with _tls_broker(pki, handshake_timeout=1.0) as broker:
        with pytest.raises((ConnectionError, aiormq.exceptions.AMQPError, TimeoutError)):
            await asyncio.wait_for(aiormq.connect(f"amqp://guest:guest@127.0.0.1:{broker.port}/"), WAIT)
        assert broker.status().connections == []


def test_broker_config_rejects_half_a_tls_setup(pki: Pki) -> None:
    from gear.broker import BrokerConfig

    with pytest.raises(ValueError, match="both a certificate and its key"):
        BrokerConfig(tls_cert=str(pki.server_cert))
    with pytest.raises(ValueError, match="need tls_cert"):
        BrokerConfig(tls_ca=str(pki.ca))
    with pytest.raises(ValueError, match="needs tls_ca"):
        BrokerConfig(tls_cert=str(pki.server_cert), tls_key=str(pki.server_key), tls_require_client_cert=True)


def test_cli_broker_listens_for_amqps(pki: Pki) -> None:
    proc = subprocess.Popen(
        [
            *GEAR,
            "broker",
            "--port",
            "0",
            "--tls-cert",
            str(pki.server_cert),
            "--tls-key",
            str(pki.server_key),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "listening on amqps://guest:***@127.0.0.1:" in line, line
        assert "over TLS" in line
    finally:
        proc.terminate()
        proc.communicate(timeout=20)


def test_cli_broker_with_a_key_that_does_not_fit_is_one_line(pki: Pki) -> None:
    done = subprocess.run(
        [
            *GEAR,
            "broker",
            "--port",
            "0",
            "--tls-cert",
            str(pki.server_cert),
            "--tls-key",
            str(pki.client_key),
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("gear: cannot use TLS certificate"), done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.rabbitmq
async def test_sdk_against_a_rabbitmq_with_tls(pki: Pki) -> None:
    """Runs only against a RabbitMQ that already has an amqps listener (never reconfigure a shared one)."""
    import os

    url, ca = os.environ.get("GEAR_TEST_AMQPS_URL"), os.environ.get("GEAR_TEST_AMQPS_CA")
    if not url or not ca:
        pytest.skip(
            "the shared RabbitMQ has no TLS listener, and adding one means reconfiguring and restarting its "
            "listeners; set GEAR_TEST_AMQPS_URL and GEAR_TEST_AMQPS_CA to run this against one that has"
        )
    assert await _echo_round_trip(url, tls_ca=ca) == 41
    svc = gear.Service(unique("WEB"), "w1", url=url, serve=False, connect_wait=0.3, tls_ca=str(pki.other_ca))
    with pytest.raises(gear.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        await svc.start()
