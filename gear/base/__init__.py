"""The SDK's vocabulary: values every other layer shares, and nothing that talks to a broker.

Addresses and routes (:mod:`~gear.base.address`), the exchanges and queues they map to
(:mod:`~gear.base.topology`), the message envelope (:mod:`~gear.base.envelope`), deadlines and the
request context (:mod:`~gear.base.deadline`, :mod:`~gear.base.context`), replies
(:mod:`~gear.base.reply`), log records, timers, secret masking and size limits. It may import
``gear.errors`` and the standard library only: no link, no session, no calling or serving side.
"""

__all__: list[str] = []
