"""The API key file: one key per home, even when several processes start at once."""

from __future__ import annotations

import multiprocessing
import queue
from multiprocessing.synchronize import Barrier
from pathlib import Path

import pytest

from scratchpad.config import Settings
from scratchpad.errors import ConfigError
from scratchpad.server.auth import key_path, resolve_api_key

WORKERS = 8
TRIALS = 4
DEADLINE_S = 30.0


def _resolve_together(home: str, barrier: Barrier, answers: multiprocessing.Queue[str]) -> None:
    """In a child process: wait until every worker is ready, then resolve the key."""
    barrier.wait(DEADLINE_S)
    answers.put(resolve_api_key(Settings(home=Path(home))))


def _keys_of_simultaneous_starts(home: Path) -> list[str]:
    context = multiprocessing.get_context("fork")  # cheap children, all released at once
    barrier = context.Barrier(WORKERS)
    answers: multiprocessing.Queue[str] = context.Queue()
    workers = [
        context.Process(target=_resolve_together, args=(str(home), barrier, answers))
        for _ in range(WORKERS)
    ]
    for worker in workers:
        worker.start()
    try:
        return [answers.get(timeout=DEADLINE_S) for _ in workers]
    except queue.Empty:
        pytest.fail("a worker did not answer: see its traceback above")
    finally:
        for worker in workers:
            worker.join(DEADLINE_S)
            if worker.is_alive():
                worker.kill()


@pytest.mark.parametrize("trial", range(TRIALS))
def test_processes_starting_together_agree_on_one_key(tmp_path: Path, trial: int) -> None:
    home = tmp_path / f"home-{trial}"
    keys = _keys_of_simultaneous_starts(home)
    assert len(set(keys)) == 1, f"{len(set(keys))} different keys from {WORKERS} processes"
    assert key_path(Settings(home=home)).read_text() == keys[0] + "\n"
    assert [p.name for p in home.iterdir()] == ["api_key"]  # no temp file left behind


def test_an_empty_key_file_is_refused_with_what_to_do(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path)
    key_path(settings).write_text("\n")
    with pytest.raises(ConfigError, match=r"api_key is empty.*delete it"):
        resolve_api_key(settings)
