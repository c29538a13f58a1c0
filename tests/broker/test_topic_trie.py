"""The topic trie against a brute-force matcher: every pattern form, bindings added and removed."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from gear.broker.model.exchange import Exchange, topic_match

# few distinct words, so that keys and patterns meet often; "" makes empty words, "*" and "#" in a
# routing key are literal words
WORDS = st.sampled_from(["", "a", "b", "c"])
PATTERN_WORDS = st.sampled_from(["", "a", "b", "*", "#"])
ROUTING_KEYS = st.lists(st.sampled_from(["", "a", "b", "c", "*", "#"]), max_size=5).map(".".join)
PATTERNS = st.lists(PATTERN_WORDS, max_size=5).map(".".join)
DESTINATIONS = st.sampled_from(["q1", "q2", "q3", "q4"])
ARGUMENTS = st.sampled_from([{}, {"x": 1}])


def brute_force(bindings: dict[tuple[str, str, int], None], routing_key: str) -> set[str]:
    return {dest for dest, pattern, _ in bindings if topic_match(pattern, routing_key)}


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.tuples(st.booleans(), DESTINATIONS, PATTERNS, ARGUMENTS), max_size=30),
    st.lists(ROUTING_KEYS, min_size=1, max_size=8),
)
def test_topic_routing_matches_brute_force_as_bindings_come_and_go(
    changes: list[tuple[bool, str, str, dict[str, int]]], keys: list[str]
) -> None:
    ex = Exchange("t", "topic")
    expected: dict[tuple[str, str, int], None] = {}
    for add, dest, pattern, args in changes:
        ident = (dest, pattern, len(args))
        if add:
            assert ex.bind(dest, pattern, args) is (ident not in expected)
            expected[ident] = None
        else:
            assert ex.unbind(dest, pattern, args) is (ident in expected)
            expected.pop(ident, None)
        # routing between changes fills the cache, so a stale entry would show in the next round
        for key in keys:
            routed = ex.route(key, lambda: None)
            assert len(routed) == len(set(routed)), "a destination routed twice"
            assert set(routed) == brute_force(expected, key), f"key {key!r}, bindings {list(expected)}"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(DESTINATIONS, PATTERNS), max_size=20), DESTINATIONS, ROUTING_KEYS)
def test_removing_a_destination_removes_all_its_routes(
    bindings: list[tuple[str, str]], gone: str, key: str
) -> None:
    ex = Exchange("t", "topic")
    for dest, pattern in bindings:
        ex.bind(dest, pattern, {})
    ex.route(key, lambda: None)
    ex.unbind_destination(gone)
    left = {(dest, pattern, 0): None for dest, pattern in bindings if dest != gone}
    assert set(ex.route(key, lambda: None)) == brute_force(left, key)


@given(st.lists(WORDS, max_size=6).map(".".join))
def test_hash_alone_and_hash_hash_match_every_key(key: str) -> None:
    ex = Exchange("t", "topic")
    ex.bind("q1", "#", {})
    ex.bind("q2", "#.#", {})
    assert ex.route(key, lambda: None) == ("q1", "q2")


def test_results_keep_the_order_destinations_were_first_bound() -> None:
    ex = Exchange("t", "topic")
    for i in range(50):
        ex.bind(f"q{i}", "#" if i % 2 else f"T.h{i}", {})
    assert ex.route("T.h4", lambda: None) == tuple(f"q{i}" for i in range(50) if i % 2 or i == 4)


def test_a_fleet_of_instance_bindings_routes_each_key_to_its_instance() -> None:
    ex = Exchange("gear", "topic")
    for i in range(3000):
        ex.bind(f"T.h{i}", f"T.h{i}", {})
        ex.bind(f"T.h{i}", "@all.T", {})
    ex.bind("T", "T", {})
    assert ex.route("T.h1234", lambda: None) == ("T.h1234",)
    assert ex.route("T", lambda: None) == ("T",)
    assert len(ex.route("@all.T", lambda: None)) == 3000
    ex.unbind_destination("T.h1234")
    assert ex.route("T.h1234", lambda: None) == ()
    assert len(ex.route("@all.T", lambda: None)) == 2999
