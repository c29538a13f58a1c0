"""All of the store's file I/O: open, append, read, fsync, rename, remove. Nothing else touches disk.

Names are relative to the data directory (``msg/00000001.seg``, ``queues.log``). A whole-file
replacement (:meth:`Disk.write_atomic`) writes a temporary file, fsyncs it, renames it over the
target and fsyncs the directory, so a crash leaves either the old file or the new one.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
from collections.abc import Callable
from pathlib import Path

__all__ = ("Disk", "StoreLockedError")

TMP_SUFFIX = ".tmp"


class StoreLockedError(RuntimeError):
    """Another broker process uses this data directory."""


class Disk:
    """File operations under one directory, with cached file descriptors."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self._fds: dict[str, int] = {}
        self._retired: list[int] = []
        self._lock_fd: int | None = None

    # -- directory ---------------------------------------------------------------------------------
    def open(self) -> None:
        """Create the directory tree if needed and lock it against a second broker.

        Raises:
            StoreLockedError: another process holds the lock.
            OSError: the directory cannot be created or opened.
        """
        (self.root / "msg").mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StoreLockedError(f"{self.root} is in use by another broker") from None
        self._lock_fd = fd

    def close(self) -> None:
        """Close every descriptor and release the lock."""
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
        self.close_retired()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def listing(self, folder: str) -> list[str]:
        """File names in ``folder`` (relative names), sorted."""
        return sorted(f"{folder}/{p.name}" for p in (self.root / folder).iterdir() if p.is_file())

    def remove_temporaries(self) -> list[str]:
        """Delete leftovers of interrupted atomic writes; returns their names."""
        gone = [str(p.relative_to(self.root)) for p in self.root.rglob("*" + TMP_SUFFIX) if p.is_file()]
        for name in gone:
            (self.root / name).unlink()
        return gone

    def size(self, name: str) -> int:
        """Size of ``name`` in bytes (0 if missing)."""
        try:
            return (self.root / name).stat().st_size
        except FileNotFoundError:
            return 0

    # -- reading -----------------------------------------------------------------------------------
    def read_all(self, name: str) -> bytes:
        """The whole file (empty if missing)."""
        try:
            return (self.root / name).read_bytes()
        except FileNotFoundError:
            return b""

    def read_at(self, name: str, offset: int, size: int) -> bytes:
        """``size`` bytes at ``offset``."""
        return os.pread(self._fd(name), size, offset)

    # -- writing -----------------------------------------------------------------------------------
    def append(self, name: str, data: bytes | bytearray | memoryview) -> None:
        """Append ``data`` (not yet durable: see :meth:`sync`)."""
        self.checkpoint("append " + name)
        fd = self._fd(name)
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]

    def sync(self, name: str) -> None:
        """fsync ``name``."""
        self.checkpoint("fsync " + name)
        os.fsync(self._fd(name))

    def truncate(self, name: str, size: int) -> None:
        """Cut ``name`` to ``size`` bytes and fsync it (dropping a torn tail)."""
        fd = self._fd(name)
        os.ftruncate(fd, size)
        os.fsync(fd)

    def write_atomic(self, name: str, data: bytes | bytearray) -> None:
        """Replace (or create) ``name`` with ``data``: temporary file, fsync, rename, fsync directory."""
        self.forget(name)
        path = self.root / name
        tmp = path.with_name(path.name + TMP_SUFFIX)
        self.checkpoint("create " + name + TMP_SUFFIX)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            self.checkpoint("fsync " + name + TMP_SUFFIX)
            os.fsync(fd)
        finally:
            os.close(fd)
        self.checkpoint("rename " + name + TMP_SUFFIX)
        os.replace(tmp, path)
        self.sync_dir(str(Path(name).parent))

    def rename(self, name: str, new: str) -> None:
        """Rename ``name`` to ``new`` and make it durable."""
        self.checkpoint("rename " + name)
        self.forget(name)
        os.replace(self.root / name, self.root / new)
        self.sync_dir(str(Path(new).parent))

    def remove(self, name: str) -> None:
        """Delete ``name`` (missing is fine); call :meth:`sync_dir` to make it durable."""
        self.checkpoint("remove " + name)
        self.forget(name)
        with contextlib.suppress(FileNotFoundError):
            (self.root / name).unlink()

    def sync_dir(self, folder: str = ".") -> None:
        """fsync a directory, making creations, renames and deletions in it durable."""
        self.checkpoint("fsync directory " + folder)
        fd = os.open(self.root / folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def checkpoint(self, step: str) -> None:
        """Called before each step that changes the disk; a no-op (tests inject faults here)."""

    def fsync_job(self, name: str) -> Callable[[], None]:
        """A callable that fsyncs ``name``, safe to run in another thread (the descriptor stays open
        until :meth:`close_retired` after the job is done)."""
        return functools.partial(os.fsync, self._fd(name))

    def retire(self, name: str) -> None:
        """Stop using ``name``'s descriptor but keep it open for a job in flight."""
        fd = self._fds.pop(name, None)
        if fd is not None:
            self._retired.append(fd)

    def close_retired(self) -> None:
        """Close descriptors given up by :meth:`retire`."""
        for fd in self._retired:
            os.close(fd)
        self._retired.clear()

    def forget(self, name: str) -> None:
        """Close the cached descriptor of ``name``, if any."""
        fd = self._fds.pop(name, None)
        if fd is not None:
            os.close(fd)

    def _fd(self, name: str) -> int:
        fd = self._fds.get(name)
        if fd is None:
            fd = os.open(self.root / name, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
            self._fds[name] = fd
        return fd
