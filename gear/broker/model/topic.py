"""A trie over topic binding keys: routing costs what the key's words cost, not what the bindings do.

Theory of operation
-------------------
Each binding key is split into words (RabbitMQ's split: ``""`` is zero words, ``"a..b"`` has an empty
middle word) and stored as a path of nodes, one edge per word; ``*`` and ``#`` are edges like any
other. The node where a key's path ends holds the destinations bound with that key, each with a count
(two bindings that differ only in their arguments join the same destination twice).

Routing walks the trie with the routing key's words: from a node at word ``i`` it follows the edge
named by word ``i`` and the ``*`` edge to word ``i + 1``, and the ``#`` edge to every word from ``i``
to the end (``#`` matches zero or more words). A node reached after the last word contributes its
destinations. Only ``#`` can reach one node at one word by two paths, so entries into ``#`` nodes are
remembered and walked once: the cost is bounded by the trie's nodes times the key's words, and for keys
without wildcard bindings on their path it is one dictionary lookup per word, however many bindings
there are (RabbitMQ's ``rabbit_db_topic_exchange`` works the same way).

Binding and unbinding change only the nodes on the key's path (empty nodes are removed), so a fleet
whose instances come and go never rebuilds anything.
"""

from __future__ import annotations

from collections.abc import Hashable

__all__ = ("TopicTrie",)


class _Node:
    """One word's node: the edges below it and the destinations bound with the key that ends here."""

    __slots__ = ("children", "destinations")

    def __init__(self) -> None:
        self.children: dict[str, _Node] = {}
        self.destinations: dict[Hashable, int] = {}


class TopicTrie:
    """The topic bindings of one exchange, as a trie of their words."""

    __slots__ = ("_root",)

    def __init__(self) -> None:
        self._root = _Node()

    def add(self, words: tuple[str, ...], destination: Hashable) -> None:
        """Record one binding of ``destination`` with the key made of ``words``."""
        node = self._root
        for word in words:
            child = node.children.get(word)
            if child is None:
                child = node.children[word] = _Node()
            node = child
        node.destinations[destination] = node.destinations.get(destination, 0) + 1

    def remove(self, words: tuple[str, ...], destination: Hashable) -> None:
        """Forget one binding recorded by :meth:`add` (nothing happens if there is none)."""
        path = [self._root]
        for word in words:
            child = path[-1].children.get(word)
            if child is None:
                return
            path.append(child)
        end = path[-1]
        left = end.destinations.get(destination, 0) - 1
        if left > 0:
            end.destinations[destination] = left
            return
        end.destinations.pop(destination, None)
        # drop the nodes that lead nowhere any more, from the end of the path up
        for depth in range(len(words), 0, -1):
            node = path[depth]
            if node.children or node.destinations:
                break
            del path[depth - 1].children[words[depth - 1]]

    def match(self, words: tuple[str, ...]) -> dict[Hashable, None]:
        """The destinations of every binding whose key matches the routing key ``words`` (each once)."""
        found: dict[Hashable, None] = {}
        last = len(words)
        entered: set[tuple[int, int]] = set()
        todo: list[tuple[_Node, int]] = [(self._root, 0)]
        while todo:
            node, i = todo.pop()
            children = node.children
            if children:
                hashed = children.get("#")
                if hashed is not None:
                    for j in range(i, last + 1):
                        seen = (id(hashed), j)
                        if seen not in entered:
                            entered.add(seen)
                            todo.append((hashed, j))
                if i < last:
                    word = words[i]
                    if word != "*" and word != "#":  # a literal * or # is matched by the wildcard edge
                        child = children.get(word)
                        if child is not None:
                            todo.append((child, i + 1))
                    child = children.get("*")
                    if child is not None:
                        todo.append((child, i + 1))
            if i == last and node.destinations:
                found.update(dict.fromkeys(node.destinations))
        return found

    def __bool__(self) -> bool:
        return bool(self._root.children or self._root.destinations)
