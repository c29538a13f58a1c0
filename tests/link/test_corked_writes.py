"""Writes to the broker: the first send of a loop iteration goes out at once, the rest of that
iteration's sends share one write at its end, and the next iteration's first send goes out at once
again."""

from __future__ import annotations

from tests.link.stream_fakes import fake_stream


def test_a_lone_send_is_written_at_once() -> None:
    stream, _loop = fake_stream(0.0)
    stream.data_received(b"reply")
    stream.send_now()
    assert stream.transport.written == [b"frame"]  # type: ignore[union-attr]


def test_a_burst_of_sends_shares_one_write_at_the_end_of_the_iteration() -> None:
    stream, loop = fake_stream(0.0)
    for _ in range(5):
        stream.send_now()
    written = stream.transport.written  # type: ignore[union-attr]
    assert len(written) == 1
    loop.iteration()
    assert len(written) == 2
    stream.send_now()  # a new iteration: its first send is not held back
    assert len(written) == 3
