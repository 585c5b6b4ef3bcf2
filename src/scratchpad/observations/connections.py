"""A small pool of SQLite connections to one database file.

Each operation borrows a connection and gives it back, so any number of short-lived threads
share a bounded set of file descriptors. A borrowed connection is used by one thread at a time.
A full disk (``SQLITE_FULL``) raises DiskFullError naming the database's directory; the
transaction is rolled back and the pool works again once space is freed.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from scratchpad.fsutil import disk_full, disk_full_in

BUSY_TIMEOUT_S = 10.0
MAX_IDLE = 8
SQLITE_FULL = 13  # "database or disk is full" (the primary result code)


class ConnectionPool:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._idle: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._closed = False

    def _open(self) -> sqlite3.Connection:
        connection = sqlite3.connect(
            self.path,
            timeout=BUSY_TIMEOUT_S,
            isolation_level=None,  # transactions are explicit
            check_same_thread=False,  # borrowed by one thread at a time
        )
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=NORMAL")  # durable across process crashes
        connection.execute("PRAGMA foreign_keys=ON")
        return connection

    @contextmanager
    def connection(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            connection = self._idle.pop() if self._idle else None
        if connection is None:
            with _disk_full_in(self.path.parent):
                connection = self._open()
        try:
            with _disk_full_in(self.path.parent):
                yield connection
        finally:
            if connection.in_transaction:
                connection.rollback()
            with self._lock:
                keep = not self._closed and len(self._idle) < MAX_IDLE
                if keep:
                    self._idle.append(connection)
            if not keep:
                connection.close()

    @contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: every query inside sees the same snapshot."""
        with self.connection() as connection:
            connection.execute("BEGIN")
            yield connection
            connection.execute("COMMIT")

    @contextmanager
    def writing(self) -> Iterator[sqlite3.Connection]:
        """A write transaction, taken at once (``BEGIN IMMEDIATE``); rolled back on error."""
        with self.connection() as connection:
            connection.execute("BEGIN IMMEDIATE")
            yield connection
            connection.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()


@contextmanager
def _disk_full_in(where: Path) -> Iterator[None]:
    """:func:`~scratchpad.fsutil.disk_full_in` that also knows SQLite's word for it."""
    try:
        with disk_full_in(where):
            yield
    except sqlite3.OperationalError as exc:
        if exc.sqlite_errorcode & 0xFF != SQLITE_FULL:
            raise
        raise disk_full(where) from exc
