"""Model-based test: the store against a plain dictionary over random operation sequences.

Operations: publish (to one or more queues), deliver, ack, commit, compact, a clean restart and a
crash (a power cut: everything not committed is lost, so the model falls back to its last commit).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from gear.broker.store import Store, StoredMessage
from tests.store._faulty import FaultyDisk

QUEUES = (1, 2, 3)
Model = dict[int, dict[int, tuple[bytes, bool]]]


def _copy(model: Model) -> Model:
    return {q: dict(held) for q, held in model.items()}


class StoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="gear-store-model-"))
        self.disk = FaultyDisk(self.root)
        self.store = Store(self.root, segment_size=512, journal_rewrite_min=20, disk=self.disk)
        self.store.recover(set(QUEUES))
        self.model: Model = {q: {} for q in QUEUES}
        self.committed: Model = _copy(self.model)
        self.counter = 0

    def _reopen(self) -> None:
        self.disk = FaultyDisk(self.root)
        self.store = Store(self.root, segment_size=512, journal_rewrite_min=20, disk=self.disk)
        found = self.store.recover(set(QUEUES))
        assert not found.problems or all("bytes after offset" in p for p in found.problems)
        recovered: Model = {q: {} for q in QUEUES}
        for queue, held in found.queues.items():
            recovered[queue] = {
                mid: (self.store.read(mid).body, delivered) for mid, delivered in held.items()
            }
        assert recovered == self.model
        self.committed = _copy(self.model)

    @rule(queues=st.sets(st.sampled_from(QUEUES), min_size=1), size=st.integers(0, 300))
    def publish(self, queues: set[int], size: int) -> None:
        self.counter += 1
        body = self.counter.to_bytes(4, "big") * (size // 4 + 1)
        mid = self.store.write(StoredMessage("x", "k", b"", body))
        for queue in sorted(queues):
            self.store.enqueue(queue, mid)
            self.model[queue][mid] = (body, False)

    @precondition(lambda self: any(self.model.values()))
    @rule(data=st.data())
    def deliver(self, data: st.DataObject) -> None:
        queue = data.draw(st.sampled_from([q for q in QUEUES if self.model[q]]))
        mid = data.draw(st.sampled_from(sorted(self.model[queue])))
        self.store.deliver(queue, mid)
        self.model[queue][mid] = (self.model[queue][mid][0], True)

    @precondition(lambda self: any(self.model.values()))
    @rule(data=st.data())
    def ack(self, data: st.DataObject) -> None:
        queue = data.draw(st.sampled_from([q for q in QUEUES if self.model[q]]))
        mid = data.draw(st.sampled_from(sorted(self.model[queue])))
        self.store.ack(queue, mid)
        del self.model[queue][mid]

    @rule()
    def commit(self) -> None:
        self.store.commit()
        self.committed = _copy(self.model)

    @rule()
    def compact(self) -> None:
        self.store.compact()  # commits first
        self.committed = _copy(self.model)

    @rule()
    def restart(self) -> None:
        self.store.close()
        self._reopen()

    @rule()
    def crash(self) -> None:
        self.disk.power_cut()
        self.model = _copy(self.committed)
        self._reopen()

    @invariant()
    def reads_match(self) -> None:
        for held in self.model.values():
            for mid, (body, _) in held.items():
                assert self.store.read(mid).body == body

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.root, ignore_errors=True)


StoreMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
TestStoreModel = StoreMachine.TestCase
