"""Users, hashes, permissions, the loopback rule, definitions and masking, without sockets."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import pytest
from pamqp import commands, encode

from gear.base.redact import mask_secrets, mask_url
from gear.broker import BrokerConfig
from gear.broker.node import access as access_module
from gear.broker.node.access import (
    AccessControl,
    Permission,
    hash_password,
    is_loopback_address,
    verify_password,
)
from gear.broker.node.definitions import DefinitionsError, parse_definitions
from gear.broker.protocol.connection import SILENT_CLOSE_DELAY
from tests.broker._harness import PROTOCOL_HEADER, Client, make_core

REFUSED = (
    "ACCESS_REFUSED - Login was refused using authentication mechanism {}. "
    "For details see the broker logfile."
)
CAPS: dict[str, Any] = {"authentication_failure_close": True}


# -- hashes --------------------------------------------------------------------------------------


def test_hash_is_rabbitmq_salted_sha256() -> None:
    stored = hash_password("s3cret", salt=b"\x01\x02\x03\x04")
    raw = base64.b64decode(stored)
    assert raw[:4] == b"\x01\x02\x03\x04"
    assert raw[4:] == hashlib.sha256(b"\x01\x02\x03\x04s3cret").digest()
    assert verify_password(stored, "s3cret")
    assert not verify_password(stored, "s3cret ")
    assert not verify_password("not base64!", "s3cret")
    assert hash_password("s3cret") != hash_password("s3cret"), "a new random salt every time"


def test_sha512_hashes_verify_too() -> None:
    stored = hash_password("pw", algorithm="rabbit_password_hashing_sha512")
    assert verify_password(stored, "pw", algorithm="rabbit_password_hashing_sha512")
    with pytest.raises(ValueError, match="unknown hashing algorithm"):
        hash_password("pw", algorithm="rabbit_password_hashing_md5")


def test_unknown_user_costs_the_same_work_as_a_known_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """No timing oracle: one hash check either way (benchmarks/login_timing.py measures the times)."""
    calls: list[str] = []
    real = access_module.verify_password

    def counting(stored: str, password: str, **kw: Any) -> bool:
        calls.append(stored)
        return real(stored, password, **kw)

    monkeypatch.setattr(access_module, "verify_password", counting)
    control = AccessControl.from_plain({"alice": "right"})
    for user in ("alice", "mallory"):
        with pytest.raises(access_module.LoginRefusedError):
            control.authenticate("PLAIN", user, "wrong", peer_address="127.0.0.1")
    assert len(calls) == 2
    assert len(base64.b64decode(calls[0])) == len(base64.b64decode(calls[1])), "same hash size, same work"


# -- permissions and addresses ---------------------------------------------------------------------


def test_permission_regexps_are_searched_and_empty_matches_nothing() -> None:
    permission = Permission(configure="app", write="", read="^r-")
    assert permission.allows("configure", "my-app-queue"), "RabbitMQ searches, it does not anchor"
    assert not permission.allows("write", "anything")
    assert not permission.allows("write", "amq.default"), "the default exchange is checked by that name"
    assert permission.allows("read", "r-q")
    assert not permission.allows("read", "x-r-q")
    with pytest.raises(ValueError, match="invalid read permission regexp"):
        Permission(read="(")


@pytest.mark.parametrize(
    ("address", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.9.8.7", True),
        ("::1", True),
        ("::ffff:127.0.0.1", True),
        ("localhost", True),
        ("10.1.2.3", False),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.10", False),
        ("", False),
        ("example.com", False),
    ],
)
def test_loopback_addresses(address: str, loopback: bool) -> None:
    assert is_loopback_address(address) is loopback


def test_refuses_a_network_interface_with_only_guest() -> None:
    with pytest.raises(ValueError, match=r"refusing to listen on 0\.0\.0\.0.*--allow-guest-remote"):
        BrokerConfig(host="0.0.0.0")
    with pytest.raises(ValueError, match=r"refusing to listen on 10\.0\.0\.5"):
        BrokerConfig(host="10.0.0.5", users={"guest": "other-password"})
    BrokerConfig(host="0.0.0.0", loopback_users=())  # explicitly allowed
    BrokerConfig(host="0.0.0.0", users={"guest": "guest", "app": "pw"})  # someone can log in remotely
    BrokerConfig(host="127.0.0.1")
    BrokerConfig(host="localhost")


# -- logins on the sans-I/O core -------------------------------------------------------------------


def _start_ok(client: Client, mechanism: str, response: str, caps: dict[str, Any] | None = None) -> list[Any]:
    out = client.feed(PROTOCOL_HEADER)
    assert out[0][1].mechanisms == (
        "PLAIN AMQPLAIN EXTERNAL" if client.conn.certificate_user else "PLAIN AMQPLAIN"
    )
    return client.send(
        0,
        commands.Connection.StartOk(
            client_properties={"capabilities": CAPS if caps is None else caps},
            mechanism=mechanism,
            response=response,
        ),
    )


def test_guest_from_a_non_loopback_peer_is_refused_like_a_wrong_password() -> None:
    core, _ = make_core()
    remote = _start_ok(Client(core, peer="10.1.2.3:40000"), "PLAIN", "\0guest\0guest")
    wrong = _start_ok(Client(core), "PLAIN", "\0guest\0wrong")
    assert [(o[1].reply_code, o[1].reply_text) for o in (remote[-1], wrong[-1])] == [
        (403, REFUSED.format("PLAIN"))
    ] * 2
    ipv6 = _start_ok(Client(core, peer="::1:40000"), "PLAIN", "\0guest\0guest")
    assert isinstance(ipv6[-1][1], commands.Connection.Tune), "::1 is loopback"
    assert core.status().failed_logins == 2


def test_amqplain_and_external() -> None:
    core, _ = make_core(users={"guest": "guest", "cn-user": "pw"})
    table = encode.field_table({"LOGIN": "guest", "PASSWORD": "guest"})[4:].decode()
    assert isinstance(_start_ok(Client(core), "AMQPLAIN", table)[-1][1], commands.Connection.Tune)
    by_cert = Client(core, certificate_user="cn-user")
    assert isinstance(_start_ok(by_cert, "EXTERNAL", "")[-1][1], commands.Connection.Tune)
    assert by_cert.conn.user == "cn-user"
    stranger = Client(core, certificate_user="not-a-user")
    assert _start_ok(stranger, "EXTERNAL", "")[-1][1].reply_text == REFUSED.format("EXTERNAL")


@pytest.mark.parametrize(
    ("mechanism", "response", "caps"),
    [
        ("PLAIN", "\0guest\0wrong", {}),  # no authentication_failure_close
        ("CRAM-MD5", "\0guest\0guest", CAPS),
        ("EXTERNAL", "", CAPS),  # not offered without a client certificate
        ("PLAIN", "guest", CAPS),
        ("AMQPLAIN", "\x05LOGINS", CAPS),
    ],
)
def test_failed_handshake_is_closed_silently_after_the_delay(
    mechanism: str, response: str, caps: dict[str, Any]
) -> None:
    core, clock = make_core()
    client = Client(core)
    out = _start_ok(client, mechanism, response, caps)
    assert [type(o[1]) for o in out] == [], "no answer at all"
    clock.now += SILENT_CLOSE_DELAY - 0.1
    core.tick()
    assert not client.conn.finished
    clock.now += 0.1
    core.tick()
    assert client.conn.finished
    assert core.status().failed_logins == 1


def test_update_secret_rechecks_vhost_access() -> None:
    core, _ = make_core()
    client = Client(core)
    client.handshake()
    client.open_channel(1)
    out = client.send(0, commands.Connection.UpdateSecret(new_secret="anything", reason="token refresh"))
    assert isinstance(out[-1][1], commands.Connection.UpdateSecretOk)
    core.access.permissions = {("guest", "other"): Permission()}  # guest lost "/" meanwhile
    out = client.send(0, commands.Connection.UpdateSecret(new_secret="anything", reason="token refresh"))
    close = out[-1][1]
    assert (close.reply_code, close.reply_text) == (
        530,
        "NOT_ALLOWED - access to vhost '/' refused for user 'guest'",
    )
    assert (close.class_id, close.method_id) == (10, 70)


def test_restricted_publish_is_refused_with_class_and_method() -> None:
    core, _ = make_core(permissions={("guest", "/"): Permission(".*", "^allowed$", ".*")})
    client = Client(core)
    client.handshake()
    client.open_channel(1)
    out = client.publish(1, "amq.direct", "k")
    close = out[-1][1]
    assert (close.reply_code, close.class_id, close.method_id) == (403, 60, 40)
    assert (
        close.reply_text
        == "ACCESS_REFUSED - access to exchange 'amq.direct' in vhost '/' refused for user 'guest'"
    )


# -- definitions -----------------------------------------------------------------------------------


def test_definitions_load_hashes_vhosts_and_permissions() -> None:
    stored = hash_password("app-pw")
    definitions = parse_definitions(
        {
            "rabbit_version": "3.10.0",
            "users": [{"name": "app", "password_hash": stored, "tags": "monitoring,management"}],
            "vhosts": [{"name": "/"}, {"name": "orders"}],
            "permissions": [
                {"user": "app", "vhost": "orders", "configure": "^app-", "write": ".*", "read": ".*"}
            ],
            "queues": [{"name": "ignored"}],
        }
    )
    config = BrokerConfig(definitions=definitions)
    assert config.user_names() == ["app"], "no default guest once definitions bring users"
    assert config.all_vhosts() == ("/", "orders")
    control = config.access_control()
    assert control.authenticate("PLAIN", "app", "app-pw", peer_address="10.0.0.1") == "app"
    assert control.grants("app", "/") is None
    grants = control.grants("app", "orders")
    assert grants is not None
    assert grants.permission.configure == "^app-"
    assert definitions.users[0].tags == ("monitoring", "management")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"users": [{"name": "app", "password": "plain"}]}, "has a plain 'password'.*salted hashes only"),
        ({"users": [{"name": "app"}]}, "no 'password_hash'"),
        ({"users": [{"name": "a", "password_hash": "x", "hashing_algorithm": "md5"}]}, "unsupported hashing"),
        ({"permissions": [{"user": "a", "vhost": "/", "configure": "(", "write": "", "read": ""}]}, "regexp"),
        ({"users": "nope"}, "users"),
    ],
)
def test_bad_definitions_are_refused_clearly(data: Any, message: str) -> None:
    with pytest.raises(DefinitionsError, match=message):
        parse_definitions(data, source="defs.json")


# -- masking ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        ("amqp://guest:guest@localhost/", "amqp://guest:***@localhost/"),
        ("amqps://u:p%40ss@[::1]:5671/vh?heartbeat=5", "amqps://u:***@[::1]:5671/vh?heartbeat=5"),
        ("amqp://u:p@ss@host:5672/", "amqp://u:***@host:5672/"),
        ("amqp://user@host/", "amqp://user@host/"),
        ("amqp://host/", "amqp://host/"),
        ("amqp://:only-password@host/", "amqp://:***@host/"),
    ],
)
def test_mask_url(url: str, masked: str) -> None:
    assert mask_url(url) == masked


def test_mask_secrets_in_free_text() -> None:
    text = "cannot connect to amqp://u:hunter2@h:1/ (input_value=('amqps://a:b@c/', 'amqp://x@y/'))"
    assert (
        mask_secrets(text)
        == "cannot connect to amqp://u:***@h:1/ (input_value=('amqps://a:***@c/', 'amqp://x@y/'))"
    )
