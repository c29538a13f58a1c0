"""The message store on its own: what it keeps across restarts, compaction, torn writes, faults."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from gear.broker.store import Store, StoredMessage
from gear.broker.store.index import FileInfo, plan_compaction
from gear.broker.store.record import (
    OP_ACK,
    OP_ENQUEUE,
    decode_payload,
    encode_journal,
    encode_message,
    encode_payload,
    open_block,
    scan_journal,
    scan_segment,
    seal_block,
)
from tests.store._faulty import CrashError, FaultyDisk


def _msg(n: int, size: int = 40) -> StoredMessage:
    return StoredMessage("ex", f"key.{n}", b"\x10\x00\x02", f"body-{n}-".encode().ljust(size, b"x"))


def _contents(store: Store, queues: set[int]) -> dict[int, dict[bytes, bool]]:
    """Recover and return queue -> {body: delivered}."""
    found = store.recover(queues)
    return {q: {store.read(mid).body: d for mid, d in held.items()} for q, held in found.queues.items()}


def test_payload_round_trip() -> None:
    message = StoredMessage("amq.topic", "a.b", b"\x80\x00\x05hello", b"\x00\xff" * 10)
    assert decode_payload(encode_payload(message)) == message


def test_messages_queues_and_delivered_flags_survive_a_restart(tmp_path: Path) -> None:
    store = Store(tmp_path)
    shared = store.write(_msg(1))
    store.enqueue(1, shared)
    store.enqueue(2, shared)  # fan-out: one copy, two references
    only = store.write(_msg(2))
    store.enqueue(1, only)
    store.deliver(1, only)
    gone = store.write(_msg(3))
    store.enqueue(2, gone)
    store.ack(2, gone)
    store.close()

    store = Store(tmp_path)
    assert _contents(store, {1, 2}) == {
        1: {_msg(1).body: False, _msg(2).body: True},
        2: {_msg(1).body: False},
    }
    assert store.stats().messages == 2
    store.close()


def test_nothing_survives_without_commit_after_a_crash(tmp_path: Path) -> None:
    disk = FaultyDisk(tmp_path)
    store = Store(tmp_path, disk=disk)
    kept = store.write(_msg(1))
    store.enqueue(1, kept)
    store.commit()
    lost = store.write(_msg(2))
    store.enqueue(1, lost)
    disk.power_cut()

    store = Store(tmp_path)
    assert _contents(store, {1}) == {1: {_msg(1).body: False}}
    store.close()


def test_a_deleted_queue_gives_nothing_back(tmp_path: Path) -> None:
    store = Store(tmp_path)
    mid = store.write(_msg(1))
    store.enqueue(7, mid)
    store.close()
    store = Store(tmp_path)
    assert store.recover({8}).queues == {}
    assert store.stats().messages == 0
    store.close()


def test_torn_tails_are_dropped_and_reported(tmp_path: Path) -> None:
    store = Store(tmp_path)
    for n in range(3):
        store.enqueue(1, store.write(_msg(n)))
        store.commit()  # one block per commit
    store.close()
    segment = tmp_path / "msg" / "00000001.seg"
    segment.write_bytes(segment.read_bytes()[:-5])  # the last block was half written
    with (tmp_path / "queues.log").open("ab") as journal:
        journal.write(b"\x01\x02")

    store = Store(tmp_path)
    recovered = store.recover({1})
    assert [store.read(mid).body for mid in recovered.queues[1]] == [_msg(0).body, _msg(1).body]
    assert any("00000001.seg" in p for p in recovered.problems)
    assert any("queues.log" in p for p in recovered.problems)
    assert any("missing" in p for p in recovered.problems)
    store.close()
    store = Store(tmp_path)
    assert store.recover({1}).problems == [], "the damage was cut away and reported once"
    store.close()


def _blocks(*records: bytes) -> bytearray:
    out = bytearray()
    for data in records:
        block = bytearray()
        open_block(block)
        block += data
        seal_block(block)
        out += block
    return out


def test_a_corrupted_block_stops_the_scan_there() -> None:
    data = _blocks(encode_message(1, encode_payload(_msg(1))), encode_message(2, encode_payload(_msg(2))))
    data[-3] ^= 0xFF
    found, envelopes, _, damaged, valid = scan_segment(bytes(data), {1: 1, 2: 1})
    assert damaged == []
    assert [mid for mid, _, _ in found] == [1]
    assert envelopes[1] == ("ex", "key.1", b"\x10\x00\x02", 40)
    assert valid == len(_blocks(encode_message(1, encode_payload(_msg(1)))))


def test_journal_scan_stops_at_a_bad_block() -> None:
    data = _blocks(encode_journal(OP_ENQUEUE, 1, 5), encode_journal(OP_ACK, 1, 5))
    data[-2] ^= 1
    records, damaged, valid = scan_journal(bytes(data))
    assert damaged == []
    assert records == [(OP_ENQUEUE, 1, 5)]
    assert valid == len(data) // 2


def test_damage_in_the_middle_of_a_file_loses_only_that_block(tmp_path: Path) -> None:
    store = Store(tmp_path)
    for n in range(3):
        store.enqueue(1, store.write(_msg(n)))
        store.commit()  # one block per message
    store.close()
    segment = tmp_path / "msg" / "00000001.seg"
    data = bytearray(segment.read_bytes())
    block = len(data) // 3
    data[block + 30] ^= 0xFF  # a flipped byte inside the second message's block
    segment.write_bytes(bytes(data))

    store = Store(tmp_path)
    recovered = store.recover({1})
    assert [store.read(mid).body for mid in recovered.queues[1]] == [_msg(0).body, _msg(2).body]
    assert any(f"bytes {block}..{2 * block} damaged" in p for p in recovered.problems), recovered.problems
    assert any("1 message(s) missing" in p for p in recovered.problems)
    store.enqueue(1, store.write(_msg(3)))  # and it keeps working
    store.close()
    store = Store(tmp_path)
    found = store.recover({1})
    assert [store.read(mid).body for mid in found.queues[1]] == [_msg(0).body, _msg(2).body, _msg(3).body]
    store.close()


def test_plan_compaction_combines_the_emptiest_closed_files() -> None:
    files = {
        1: FileInfo(total=100, valid=10, messages=1),
        2: FileInfo(total=100, valid=90, messages=9),
        3: FileInfo(total=100, valid=0, messages=0),
        4: FileInfo(total=100, valid=20, messages=2),
        5: FileInfo(total=100, valid=5, messages=1),  # current: never
    }
    assert plan_compaction(files, 5, threshold=0.5, segment_size=1000) == [3, 1, 4]
    assert plan_compaction(files, 5, threshold=0.5, segment_size=25) == [3, 1]
    assert plan_compaction({1: FileInfo(100, 60, 3)}, 2, threshold=0.5, segment_size=1000) == []


def _garbage_store(root: Path) -> tuple[Store, dict[int, dict[bytes, bool]]]:
    """A store with several small segments, most of their messages acked."""
    store = Store(root, segment_size=300)
    expected: dict[int, dict[bytes, bool]] = {1: {}, 2: {}}
    for n in range(24):
        mid = store.write(_msg(n))
        store.enqueue(1, mid)
        if n % 3 == 0:
            store.enqueue(2, mid)
            expected[2][_msg(n).body] = False
        if n % 4:
            store.ack(1, mid)
        else:
            store.deliver(1, mid)
            expected[1][_msg(n).body] = True
    store.commit()
    return store, expected


def test_compaction_reclaims_space_and_keeps_every_live_message(tmp_path: Path) -> None:
    store, expected = _garbage_store(tmp_path)
    before = store.stats()
    while store.compact():
        pass
    after = store.stats()
    assert after.garbage < before.garbage
    assert after.files < before.files
    assert sum(p.stat().st_size for p in (tmp_path / "msg").iterdir()) < before.bytes
    store.close()
    store = Store(tmp_path)
    assert _contents(store, {1, 2}) == expected
    store.close()


def _compact_fully(store: Store) -> None:
    while store.compact():
        pass


def _rewrite_journal(store: Store) -> None:
    store.rewrite_journal()


@pytest.mark.parametrize(
    "operation", [_compact_fully, _rewrite_journal], ids=["segment-compaction", "journal-rewrite"]
)
def test_compaction_interrupted_at_every_step_loses_nothing(
    tmp_path: Path, operation: Callable[[Store], None]
) -> None:
    seed = tmp_path / "seed"
    store, expected = _garbage_store(seed)
    store.close()
    probe = FaultyDisk(tmp_path / "probe")
    shutil.copytree(seed, tmp_path / "probe")
    store = Store(tmp_path / "probe", segment_size=300, disk=probe)
    store.recover({1, 2})
    opened = len(probe.steps)
    operation(store)
    steps = probe.steps[opened:]
    store.close()
    assert any(s.startswith("rename") for s in steps)
    assert len(steps) >= 4

    for k in range(1, len(steps) + 1):
        root = tmp_path / f"crash{k}"
        shutil.copytree(seed, root)
        disk = FaultyDisk(root)
        store = Store(root, segment_size=300, disk=disk)
        store.recover({1, 2})
        disk.crash_at = len(disk.steps) + k
        with pytest.raises(CrashError):
            operation(store)
        store = Store(root, segment_size=300)
        assert _contents(store, {1, 2}) == expected, f"crash before step {k}: {steps[k - 1]}"
        _compact_fully(store)
        store.close()
        store = Store(root, segment_size=300)
        assert _contents(store, {1, 2}) == expected, f"compaction after a crash at step {k}"
        store.close()


def test_journal_rewrite_keeps_the_live_state(tmp_path: Path) -> None:
    store = Store(tmp_path, journal_rewrite_min=10)
    kept = []
    for n in range(30):
        mid = store.write(_msg(n))
        store.enqueue(1, mid)
        if n < 25:
            store.ack(1, mid)
        else:
            kept.append(_msg(n).body)
    size = (tmp_path / "queues.log").stat().st_size if (tmp_path / "queues.log").exists() else 0
    store.commit()
    assert store.compact()
    assert (tmp_path / "queues.log").stat().st_size < max(size, 1) + 60 * 21
    store.close()
    store = Store(tmp_path)
    assert _contents(store, {1}) == {1: dict.fromkeys(kept, False)}
    store.close()


def test_a_second_broker_cannot_open_the_same_directory(tmp_path: Path) -> None:
    from gear.broker.store import StoreLockedError

    store = Store(tmp_path)
    with pytest.raises(StoreLockedError):
        Store(tmp_path)
    store.close()
