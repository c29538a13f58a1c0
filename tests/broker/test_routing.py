"""Routing tables: topic rules with empty words, headers exchange, direct, fanout."""

from __future__ import annotations

import pytest

from gear.broker.model.exchange import Exchange, headers_match, split_words, topic_match

TOPIC_CASES = [
    ("#", "", True),
    ("#", "a.b.c", True),
    ("#", ".", True),
    ("*", "", False),
    ("*", "a", True),
    ("*", ".", False),
    ("*", "a.b", False),
    ("*.*", ".", True),
    ("a.*", "a.", True),
    ("a.*", "a", False),
    ("a.#", "a", True),
    ("#.a", "a", True),
    ("a.#.b", "a.b", True),
    ("a.#.b", "a.x.y.b", True),
    ("a.#.b", "a.x.y.c", False),
    ("", "", True),
    ("", "a", False),
    ("a..b", "a..b", True),
    ("a.*.b", "a..b", True),
    ("#.#", "", True),
    ("#.*", "", False),
    ("#.*", "a", True),
    ("*.#", ".", True),
    ("a.b", "a.b", True),
    ("a.b", "a.bc", False),
    ("#.b.#", "x.b", True),
]


@pytest.mark.parametrize(("binding", "key", "expected"), TOPIC_CASES)
def test_topic_rules_match_rabbitmq(binding: str, key: str, expected: bool) -> None:
    assert topic_match(binding, key) is expected, f"binding {binding!r} vs key {key!r}"


def test_empty_key_is_zero_words() -> None:
    assert split_words("") == ()
    assert split_words(".") == ("", "")


def test_topic_exchange_delivers_each_destination_once_and_cache_follows_bindings() -> None:
    ex = Exchange("t", "topic")
    ex.bind("q1", "a.#", {})
    ex.bind("q1", "a.*", {})
    ex.bind("q2", "#", {})
    assert ex.route("a.b", lambda: None) == ("q1", "q2")
    ex.unbind("q2", "#", {})
    assert ex.route("a.b", lambda: None) == ("q1",)


@pytest.mark.parametrize(
    ("arguments", "headers", "expected"),
    [
        ({"x-match": "all", "a": 1, "b": "x"}, {"a": 1, "b": "x"}, True),
        ({"x-match": "all", "a": 1, "b": "x"}, {"a": 1}, False),
        ({"x-match": "any", "a": 1, "b": "x"}, {"a": 1}, True),
        ({"x-match": "any", "a": 1}, {"a": 2}, False),
        ({"a": 1}, {"a": 1, "c": 3}, True),
        ({"x-match": "all"}, {}, True),
        ({"x-match": "any"}, {"a": 1}, False),
        ({"x-match": "all", "x-extra": 1}, {}, True),
        ({"x-match": "all-with-x", "x-extra": 1}, {}, False),
        ({"x-match": "any", "From": "q1"}, {"From": b"q1"}, True),
        ({"x-match": "all", "a": 1}, None, False),
    ],
)
def test_headers_exchange_rules(
    arguments: dict[str, object], headers: dict[str, object] | None, expected: bool
) -> None:
    assert headers_match(arguments, headers) is expected


def test_direct_and_fanout() -> None:
    direct = Exchange("d", "direct")
    direct.bind("q1", "k", {})
    direct.bind("q2", "k", {})
    direct.bind("q3", "other", {})
    assert direct.route("k", lambda: None) == ("q1", "q2")
    assert direct.route("none", lambda: None) == ()
    fanout = Exchange("f", "fanout")
    fanout.bind("q1", "a", {})
    fanout.bind("q1", "b", {})
    fanout.bind("q2", "", {})
    assert fanout.route("anything", lambda: None) == ("q1", "q2")
    assert fanout.unbind_destination("q1") == 2
    assert fanout.route("anything", lambda: None) == ("q2",)
