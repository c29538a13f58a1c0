"""The four address forms map to wildcard-free routing keys that route exactly."""

from __future__ import annotations

import pytest

from gear.base.address import (
    ALL_WORD,
    Address,
    Route,
    instance_bindings,
    validate_host,
    validate_type,
)


@pytest.mark.parametrize(
    ("text", "route", "routing_key"),
    [
        ("REPO.host2", Route.TYPE_HOST, "REPO.host2"),
        ("CTRL", Route.TYPE, "CTRL"),
        ("CTRL.*", Route.TYPE_ALL, "CTRL.@all"),
        ("*.*", Route.ALL, "@all.@all"),
    ],
)
def test_each_form_parses_to_its_route_and_key(text: str, route: Route, routing_key: str) -> None:
    address = Address.parse(text)
    assert address.route is route
    assert address.routing_key == routing_key
    assert str(address) == text


@pytest.mark.parametrize(
    "bad",
    [
        "",
        ".",
        "CTRL.",
        ".host",
        "CTRL.h.x",
        "*",
        "*.host",
        "CT RL",
        "1CTRL",
        "CTRL.@all",
        "CTRL.#",
        "CTRL.h*",
        "@all",
        "CTRL.-x",
    ],
)
def test_malformed_addresses_are_rejected_early(bad: str) -> None:
    with pytest.raises(ValueError, match="invalid"):
        Address.parse(bad)


def test_routing_keys_are_limited_to_255_utf8_bytes_not_characters() -> None:
    host = "h" * 240
    assert Address.parse(f"REPO.{host}").routing_key == f"REPO.{host}"
    with pytest.raises(ValueError, match="bytes"):
        Address.parse(f"REPO.{'h' * 251}")


def test_reserved_word_cannot_be_a_type_or_host() -> None:
    with pytest.raises(ValueError, match="invalid service TYPE"):
        validate_type(ALL_WORD)
    with pytest.raises(ValueError, match="invalid HOST"):
        validate_host(ALL_WORD)


def _routes_to(routing_key: str, bindings: tuple[str, ...]) -> bool:
    """Binding keys are literal (no wildcards), so a topic exchange matches them by equality."""
    assert not any(ch in key for key in bindings for ch in "*#")
    return routing_key in bindings


def test_wire_mapping_isolates_instances_exactly() -> None:
    ctrl1 = instance_bindings("CTRL", "host1")
    ctrl2 = instance_bindings("CTRL", "host2")
    web1 = instance_bindings("WEB", "host1")
    shared_ctrl = ("CTRL",)

    p2p = Address.parse("CTRL.host2").routing_key
    assert [_routes_to(p2p, b) for b in (ctrl1, ctrl2, web1, shared_ctrl)] == [False, True, False, False]

    multicast = Address.parse("CTRL.*").routing_key
    assert [_routes_to(multicast, b) for b in (ctrl1, ctrl2, web1, shared_ctrl)] == [True, True, False, False]

    broadcast = Address.parse("*.*").routing_key
    assert [_routes_to(broadcast, b) for b in (ctrl1, ctrl2, web1, shared_ctrl)] == [True, True, True, False]

    stateless = Address.parse("CTRL").routing_key
    expected = [False, False, False, True]
    assert [_routes_to(stateless, b) for b in (ctrl1, ctrl2, web1, shared_ctrl)] == expected


def test_fanout_forms_are_flagged() -> None:
    assert Address.parse("CTRL.*").is_fanout
    assert Address.parse("*.*").is_fanout
    assert not Address.parse("CTRL").is_fanout
    assert not Address.parse("CTRL.h1").is_fanout
