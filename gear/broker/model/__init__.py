"""The broker's nouns as plain data and their rules: exchanges and the topic trie, queues and their
consumers, messages and the checks on a publish's properties, virtual hosts, queue arguments and expiry,
credit-based flow control, message totals and the direct reply-to registry.

Sans-I/O: no socket, no event loop, no clock of its own (time comes in as values, timers from
:mod:`gear.base.timers`). It may import ``gear.broker.errors``, ``gear.broker.store``, ``gear.wire`` and
``gear.base``; nothing of ``node``, ``operations``, ``protocol`` or ``shell``: what a queue needs from
its vhost or its channels it declares as a Protocol beside it (``QueueHost``, ``ConsumerChannel``...).
"""

__all__: list[str] = []
