"""Fuzzing the login: random connection.start-ok fields never crash the broker or admit a stranger.

Frames are built by hand so that every field can hold arbitrary bytes (pamqp only encodes text).
Each example runs on the sans-I/O core; a valid login is guest/guest from loopback, app/pw from
anywhere, or EXTERNAL with a certificate naming an existing user.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings, strategies as st
from pamqp import commands, encode

from gear.broker.model.checks import read_method
from tests.broker._harness import PROTOCOL_HEADER, Client, make_core

USERS = {"guest": "guest", "app": "pw"}
PEERS = ("127.0.0.1:5000", "10.9.8.7:5000", "::1:5000")


def _short(value: bytes) -> bytes:
    return bytes([len(value)]) + value


def _start_ok_frame(properties: bytes, mechanism: bytes, response: bytes, locale: bytes) -> bytes:
    arguments = properties + _short(mechanism) + struct.pack(">I", len(response)) + response + _short(locale)
    payload = struct.pack(">HH", 10, 11) + arguments
    return struct.pack(">BHI", 1, 0, len(payload)) + payload + b"\xce"


@dataclass(frozen=True)
class Attempt:
    mechanism: bytes
    response: bytes
    properties: bytes
    locale: bytes
    peer: str
    certificate_user: str | None
    claimed: tuple[str, str] | None
    """The user and password this response carries when it was built well-formed, else None."""


_names = st.sampled_from(["guest", "app", "", "gues", "guest\x00", "Guest", "app ", "nobody"])
_passwords = st.sampled_from(["guest", "pw", "", "wrong", "guest\x00", "pw\x00x"]) | st.text(max_size=8)
_field_values = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**31), 2**31 - 1), st.text(max_size=10), st.binary(max_size=10)
)


@st.composite
def attempts(draw: st.DrawFn) -> Attempt:
    kind = draw(st.sampled_from(["PLAIN", "AMQPLAIN", "EXTERNAL", "random"]))
    user, password = draw(_names), draw(_passwords)
    claimed: tuple[str, str] | None = None
    if kind == "PLAIN":
        mechanism = b"PLAIN"
        response = draw(
            st.sampled_from([f"\0{user}\0{password}".encode(), f"{user}\0{password}".encode()])
            | st.binary(max_size=40)
        )
        if response == f"\0{user}\0{password}".encode() and "\0" not in user + password:
            claimed = (user, password)
    elif kind == "AMQPLAIN":
        mechanism = b"AMQPLAIN"
        table: dict[str, Any] = draw(
            st.dictionaries(st.sampled_from(["LOGIN", "PASSWORD", "X"]), _field_values, max_size=3)
        )
        if draw(st.booleans()):
            table.update(LOGIN=user, PASSWORD=password)
        try:
            response, encoded = encode.field_table(table)[4:], True
        except (TypeError, ValueError):  # a value pamqp cannot encode: the response carries no login
            response, encoded = b"", False
        if draw(st.booleans()):
            response = draw(st.binary(max_size=40))
        elif encoded and table.get("LOGIN") == user and table.get("PASSWORD") == password and user:
            claimed = (user, password)
    elif kind == "EXTERNAL":
        mechanism, response = b"EXTERNAL", draw(st.binary(max_size=10))
    else:
        mechanism = draw(st.binary(max_size=12) | st.sampled_from([b"plain", b"", b"PLAIN ", b"CRAM-MD5"]))
        response = draw(st.binary(max_size=40))
    properties = draw(
        st.sampled_from(
            [
                encode.field_table({"capabilities": {"authentication_failure_close": True}}),
                encode.field_table({}),
                encode.field_table({"capabilities": "not a table", "connection_name": "x" * 300}),
            ]
        )
        | st.binary(max_size=16).map(lambda b: struct.pack(">I", len(b)) + b)
    )
    return Attempt(
        mechanism=mechanism,
        response=response,
        properties=properties,
        locale=draw(st.sampled_from([b"en_US", b"", b"xx"]) | st.binary(max_size=8)),
        peer=draw(st.sampled_from(PEERS)),
        certificate_user=draw(st.sampled_from([None, "guest", "app", "nobody"])),
        claimed=claimed,
    )


def _decodes(frame: bytes) -> bool:
    """Whether the method frame itself is well-formed (a malformed frame is refused before any login)."""
    try:
        read_method(frame[7:-1])
    except Exception:
        return False
    return True


def _may_log_in(attempt: Attempt) -> bool:
    remote = attempt.peer.startswith("10.")
    if attempt.mechanism == b"EXTERNAL":
        user = attempt.certificate_user
        return user in USERS and not (user == "guest" and remote)
    if attempt.claimed is None:
        return False
    user, password = attempt.claimed
    return USERS.get(user) == password and not (user == "guest" and remote)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(attempts())
def test_start_ok_never_crashes_and_never_admits_a_stranger(attempt: Attempt) -> None:
    core, clock = make_core(users=USERS)
    client = Client(core, peer=attempt.peer, certificate_user=attempt.certificate_user)
    client.feed(PROTOCOL_HEADER)
    start_ok = _start_ok_frame(attempt.properties, attempt.mechanism, attempt.response, attempt.locale)
    out = client.feed(start_ok)
    admitted = client.conn.state == "tune-ok"
    assert core.internal_errors == 0
    assert admitted == (_decodes(start_ok) and _may_log_in(attempt)), f"admitted={admitted} for {attempt}"
    if admitted:
        assert isinstance(out[-1][1], commands.Connection.Tune)
        return
    # Whatever the client sends next, it never gets further than a close.
    out = client.send(
        0,
        commands.Connection.TuneOk(channel_max=2047, frame_max=131072, heartbeat=0),
        commands.Connection.Open(virtual_host="/"),
    )
    assert not any(isinstance(obj, commands.Connection.OpenOk | commands.Connection.Tune) for _, obj in out)
    assert client.conn.state in ("closing", "closed")
    clock.now += 10
    core.tick()
    assert client.conn.finished, "a refused client's socket is closed within the delays"
    assert core.status().failed_logins <= 1
