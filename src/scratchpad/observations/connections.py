"""A small pool of SQLite connections to one database file.

Each operation borrows a connection and gives it back, so any number of short-lived threads
share a bounded set of file descriptors. A borrowed connection is used by one thread at a time.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

BUSY_TIMEOUT_S = 10.0
MAX_IDLE = 8


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
            connection = self._open()
        try:
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
