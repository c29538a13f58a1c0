"""gear.wire's codec against pamqp's: every method and the basic properties both ways, and hostile input.

pamqp is the peer here (a test dependency): what Gear encodes pamqp decodes to the same values, what
pamqp encodes Gear decodes to the same values, and the bytes are the same where both encoders have one
choice (no tables: integers in a table may take another type). Whatever bytes arrive, the decoders
either return a value or raise :class:`~gear.wire.table.FieldError`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import struct
from typing import Any

import pytest
from hypothesis import assume, given, settings, strategies as st
from pamqp import commands, frame, header
from pamqp.body import ContentBody

from gear.wire import spec
from gear.wire.content import Publish, content_frames, delivery, encode_publish
from gear.wire.methods import (
    UnknownMethodError,
    ack_frame,
    decode_method,
    deliver_frame,
    encode_method,
    get_ok_frame,
    nack_frame,
    reject_frame,
    return_frame,
)
from gear.wire.properties import (
    Properties,
    decode_properties,
    encode_properties,
    property_spans,
    splice_properties,
)
from gear.wire.table import FieldError

_NAME = st.text("abcXYZ019-_.:", max_size=40)
"""Short strings pamqp's encoder accepts for every argument (it validates exchange and queue names)."""
_TABLE = st.dictionaries(
    st.text("abkey-", min_size=1, max_size=6),
    st.booleans() | st.integers(-(2**31), 2**31 - 1) | st.text(max_size=10),
    max_size=4,
)
_ARGUMENT = {
    "octet": st.integers(0, 255),
    "short": st.integers(0, 2**16 - 1),
    "long": st.integers(0, 2**32 - 1),
    "longlong": st.integers(0, 2**63 - 1),  # pamqp packs it signed
    "bit": st.booleans(),
    "shortstr": _NAME,
    "longstr": st.text(max_size=40),
    "table": _TABLE,
}
_PINNED = {
    "ticket": st.just(0),
    "out_of_band": st.just("0"),
    "channel_id": st.just("0"),
    "known_hosts": st.just(""),
    "insist": st.just(False),
    "capabilities": st.just(""),
    "cluster_id": st.just(""),
}
"""Deprecated arguments whose value pamqp's encoder insists on."""
_METHODS = sorted(spec.INDEX.values(), key=lambda cls: cls.index)


def _method(cls: type[spec.Method]) -> st.SearchStrategy[spec.Method]:
    return st.builds(cls, **{name: _PINNED.get(name, _ARGUMENT[kind]) for name, kind in cls.layout})


def _pamqp(method: spec.Method) -> Any:
    """The same method as a pamqp object (built without its constructor, which warns on deprecated ones)."""
    cls: Any = commands.INDEX_MAPPING[method.index]
    peer = cls.__new__(cls)
    for name, _ in method.layout:
        setattr(peer, name, getattr(method, name))
    return peer


def test_the_spec_names_every_method_pamqp_knows() -> None:
    assert set(spec.INDEX) == set(commands.INDEX_MAPPING)
    for index, cls in spec.INDEX.items():
        peer: Any = commands.INDEX_MAPPING[index]
        assert cls.name == peer.name
        assert [name for name, _ in cls.layout] == list(peer.__slots__)


@pytest.mark.filterwarnings("ignore:This command is deprecated:DeprecationWarning")  # pamqp, recover-async
@pytest.mark.parametrize("cls", _METHODS, ids=lambda cls: cls.name)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_every_method_round_trips_with_pamqp(cls: type[spec.Method], data: st.DataObject) -> None:
    method = data.draw(_method(cls))
    ours = encode_method(3, method)
    try:
        theirs = frame.marshal(_pamqp(method), 3)
    except ValueError:  # pamqp's own rules (Connection.Open's insist must be False, say)
        assume(False)
    if not any(kind == "table" for _, kind in cls.layout):
        assert ours == theirs
    assert decode_method(theirs, 7, len(theirs) - 1) == method
    _, channel, decoded = frame.unmarshal(ours)
    assert channel == 3
    assert type(decoded) is commands.INDEX_MAPPING[cls.index]
    for name, _ in cls.layout:
        assert getattr(decoded, name) == getattr(method, name), name


def test_the_hand_packed_frames_are_the_methods_frames() -> None:
    assert ack_frame(2, 7, True) == encode_method(2, spec.Basic.Ack(7, True))
    assert nack_frame(2, 7, False) == encode_method(2, spec.Basic.Nack(7, False, True))
    assert reject_frame(2, 7, False) == encode_method(2, spec.Basic.Reject(7, False))
    assert deliver_frame(2, "ct", 9, True, "ex", "rk") == encode_method(
        2, spec.Basic.Deliver("ct", 9, True, "ex", "rk")
    )
    assert return_frame(2, 312, "NO_ROUTE", "ex", "rk") == encode_method(
        2, spec.Basic.Return(312, "NO_ROUTE", "ex", "rk")
    )
    assert get_ok_frame(2, 9, False, "ex", "rk", 4) == encode_method(
        2, spec.Basic.GetOk(9, False, "ex", "rk", 4)
    )


_TEXT = st.text(min_size=1, max_size=30)
_WORD = _NAME.filter(bool)
_PROPERTIES = st.builds(
    Properties,  # pamqp leaves out a property whose value is false (an empty string, 0): none here
    content_type=st.none() | _WORD,
    content_encoding=st.none() | _WORD,
    headers=st.none() | _TABLE.filter(bool),
    delivery_mode=st.none() | st.sampled_from([1, 2]),  # pamqp refuses others
    priority=st.none() | st.integers(1, 255),
    correlation_id=st.none() | _TEXT,
    reply_to=st.none() | _WORD,
    expiration=st.none() | st.text("0123456789", min_size=1, max_size=8),
    message_id=st.none() | _TEXT,
    timestamp=st.none() | st.integers(0, 2**32 - 1),  # pamqp reads larger ones as milliseconds
    message_type=st.none() | _WORD,
    user_id=st.none() | _WORD,
    app_id=st.none() | _WORD,
    cluster_id=st.none(),  # pamqp refuses one that is not empty
)


def _their_properties(props: Properties) -> commands.Basic.Properties:
    values = dataclasses.asdict(props)
    values["cluster_id"] = ""  # pamqp insists on an empty one, and leaves it out
    if props.timestamp is not None:
        values["timestamp"] = datetime.datetime.fromtimestamp(props.timestamp, datetime.UTC)
    return commands.Basic.Properties(**values)


@settings(max_examples=300, deadline=None)
@given(_PROPERTIES)
def test_properties_round_trip_with_pamqp(props: Properties) -> None:
    ours = encode_properties(props)
    theirs = bytes(_their_properties(props).marshal())
    if props.headers is None:
        assert ours == theirs
    assert decode_properties(theirs, 0, len(theirs)) == props
    assert decode_properties(ours, 0, len(ours), lenient=True) == props
    content = frame.marshal(header.ContentHeader(0, 5, _their_properties(props)), 1)
    assert decode_properties(content, 7 + 12, len(content) - 1) == props
    decoded = header.ContentHeader()
    decoded.unmarshal(struct.pack(">HHQ", 60, 0, 5) + ours)
    assert decoded.properties == _their_properties(props)


@settings(max_examples=100, deadline=None)
@given(_PROPERTIES, st.none() | _NAME, _TABLE, st.booleans())
def test_splicing_changes_the_fields_it_names_and_nothing_else(
    props: Properties, reply_to: str | None, added: dict[str, Any], drop_expiration: bool
) -> None:
    raw = encode_properties(props)
    spliced = splice_properties(
        raw, reply_to=reply_to, set_headers=added, drop_headers=("gone",), drop_expiration=drop_expiration
    )
    expected = dataclasses.replace(props)
    if reply_to is not None:
        expected.reply_to = reply_to
    expected.headers = {k: v for k, v in (props.headers or {}).items() if k not in added} | added
    if drop_expiration:
        expected.expiration = None
    assert decode_properties(spliced, 0, len(spliced)) == expected
    _, spans = property_spans(raw)
    _, new_spans = property_spans(spliced)
    for flag, (start, end) in spans.items():
        if flag not in (0x2000, 0x0200, 0x0100) or (flag == 0x2000 and not added):
            where = new_spans[flag]
            assert spliced[where[0] : where[1]] == raw[start:end], "an untouched property keeps its bytes"


@settings(max_examples=100, deadline=None)
@given(_NAME, _NAME, _PROPERTIES, st.binary(max_size=300), st.booleans(), st.sampled_from([64, 100, 4096]))
def test_a_publish_is_the_frames_pamqp_reads(
    exchange: str, routing_key: str, props: Properties, body: bytes, mandatory: bool, frame_max: int
) -> None:
    data = published = encode_publish(4, Publish(exchange, routing_key, props, body, mandatory), frame_max)
    frames = []
    while data:
        used, channel, value = frame.unmarshal(data)
        assert channel == 4
        assert used <= frame_max or not isinstance(value, ContentBody)
        frames.append(value)
        data = data[used:]
    method, head, *bodies = frames
    assert isinstance(method, commands.Basic.Publish)
    assert (method.exchange, method.routing_key, method.mandatory) == (exchange, routing_key, mandatory)
    assert isinstance(head, header.ContentHeader)
    assert head.body_size == len(body)
    assert head.properties == _their_properties(props)
    assert b"".join(part.value for part in bodies if isinstance(part, ContentBody)) == body
    assert all(isinstance(part, ContentBody) for part in bodies)
    raw = encode_properties(props)
    assert published.endswith(b"".join(content_frames(4, raw, body, frame_max)))
    assert delivery(4, "c", 1, False, exchange, routing_key, raw, body, frame_max) == deliver_frame(
        4, "c", 1, False, exchange, routing_key
    ) + b"".join(content_frames(4, raw, body, frame_max))


@settings(max_examples=1000, deadline=None)
@given(st.binary(max_size=60), st.sampled_from(sorted(spec.INDEX)))
def test_hostile_method_frames_raise_the_codecs_error(rest: bytes, index: int) -> None:
    payload = struct.pack(">I", index) + rest
    with contextlib.suppress(FieldError):
        decode_method(payload)


@pytest.mark.parametrize("cls", _METHODS, ids=lambda cls: cls.name)
def test_every_truncated_method_raises_the_codecs_error(cls: type[spec.Method]) -> None:
    full = encode_method(0, cls(**{name: _example(kind) for name, kind in cls.layout}))[7:-1]
    for cut in range(len(full)):
        try:
            decode_method(full[:cut])
        except FieldError:
            continue
        assert not cls.layout, f"{cls.name} cut to {cut} bytes decoded"


def _example(kind: str) -> Any:
    return {"bit": True, "shortstr": "abc", "longstr": "xyz", "table": {"k": 1}}.get(kind, 7)


def test_an_unknown_method_is_its_own_error() -> None:
    with pytest.raises(UnknownMethodError, match="class 60, method 999"):
        decode_method(struct.pack(">HH", 60, 999))
    with pytest.raises(FieldError, match="not UTF-8"):
        decode_method(b"\x00\x3c\x00\x28\x00\x00\x01\xff\x00\x00")


@settings(max_examples=1000, deadline=None)
@given(st.binary(max_size=80), st.booleans())
def test_hostile_property_lists_raise_the_codecs_error(raw: bytes, lenient: bool) -> None:
    try:
        decode_properties(raw, 0, len(raw), lenient=lenient)
    except FieldError:
        return
    property_spans(raw)  # what decodes has spans


def test_strict_and_lenient_decoding() -> None:
    raw = b"\x80\x01\x02\xff\xfe"
    with pytest.raises(FieldError, match="announce no property"):
        decode_properties(raw, 0, len(raw))
    assert decode_properties(raw, 0, len(raw), lenient=True).content_type == "\udcff\udcfe"
    with pytest.raises(FieldError, match="not UTF-8"):
        decode_properties(b"\x80\x00\x02\xff\xfe", 0, 5)
    with pytest.raises(FieldError, match="255"):
        encode_properties(Properties(message_id="m" * 256))
