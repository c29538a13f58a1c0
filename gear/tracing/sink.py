"""Size-rotated JSON-lines files, one series per service instance, that never raise.

Files are named ``{service}.{host}.{instance}.{index:05d}.jsonl`` in the trace directory; a new index
starts when the current file would pass ``max_bytes``. Indexes continue after the highest one already
present, so a restarted instance with the same id never overwrites its old files.

Failures (unwritable directory, full disk, a file removed under us) are logged once per sink at
WARNING, the batch in hand is dropped and counted, and the next batch tries again from a fresh file.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import BinaryIO

__all__ = ("DEFAULT_MAX_BYTES", "RotatingFileSink", "safe_name")

logger = logging.getLogger("gear.tracing")

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
"""Rotate after 64 MiB: large enough for few files, small enough for Spark to split work."""

_UNSAFE = re.compile(r"[^A-Za-z0-9_.@-]")


def safe_name(text: str) -> str:
    """``text`` with every character that is unsafe in a file name replaced by ``-``."""
    return _UNSAFE.sub("-", text) or "-"


class RotatingFileSink:
    """Appends batches of lines to size-rotated files. Not thread-safe: one writer thread owns it."""

    def __init__(self, directory: str | os.PathLike[str], stem: str, max_bytes: int = DEFAULT_MAX_BYTES):
        if max_bytes <= 0:
            raise ValueError("max_bytes must be positive")
        self.directory = Path(directory)
        self.stem = safe_name(stem)
        self.max_bytes = max_bytes
        self.dropped = 0
        """Lines lost to I/O errors."""
        self.written = 0
        """Lines written."""
        self.paths: list[Path] = []
        """Every file this sink has opened, oldest first."""
        self._file: BinaryIO | None = None
        self._size = 0
        self._index = -1
        self._warned = False

    def _next_index(self) -> int:
        if self._index >= 0:
            return self._index + 1
        pattern = re.compile(re.escape(self.stem) + r"\.(\d+)\.jsonl")
        found = [int(m.group(1)) for p in self.directory.iterdir() if (m := pattern.fullmatch(p.name))]
        return max(found, default=-1) + 1

    def _open(self) -> BinaryIO:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._index = self._next_index()
        path = self.directory / f"{self.stem}.{self._index:05d}.jsonl"
        handle = open(path, "ab")  # noqa: SIM115 - kept open across batches
        self.paths.append(path)
        self._size = 0
        return handle

    def write(self, lines: list[str], encoded: bytes | None = None) -> None:
        """Append ``lines`` (each ending in ``\\n``; ``encoded``: their UTF-8 text if the caller has it),
        rotating as needed. Never raises.

        A batch that fits in the current file is written as one chunk; one that would pass
        ``max_bytes`` is written line by line, starting a new file where needed.
        """
        if not lines:
            return
        try:
            chunk = "".join(lines).encode("utf-8") if encoded is None else encoded
            if self._file is not None and self._size + len(chunk) <= self.max_bytes:
                self._file.write(chunk)
                self._size += len(chunk)
            else:
                self._write_rotating(lines)
            if self._file is not None:
                self._file.flush()
            self.written += len(lines)
        except (OSError, ValueError) as exc:  # ValueError: the file was closed under us, or bad text
            self.dropped += len(lines)
            self._abandon_file()
            if not self._warned:
                self._warned = True
                logger.warning(
                    "gear tracing: cannot write trace events to %s (%s); dropping events, RPC continues",
                    self.directory,
                    exc,
                )

    def _write_rotating(self, lines: list[str]) -> None:
        for line in lines:
            data = line.encode("utf-8")
            if self._file is None or (self._size and self._size + len(data) > self.max_bytes):
                self._close_file()
                self._file = self._open()
            self._file.write(data)
            self._size += len(data)

    def _abandon_file(self) -> None:
        try:
            self._close_file()
        except OSError:
            self._file = None

    def _close_file(self) -> None:
        handle, self._file = self._file, None
        if handle is not None:
            handle.close()

    def close(self) -> None:
        """Close the current file. Never raises."""
        self._abandon_file()
