"""A secret stored before it was known is scrubbed again everywhere the home keeps text."""

from __future__ import annotations

import asyncio
import base64
import json
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from scratchpad.agent.persistence import SessionFiles
from scratchpad.config import Settings
from scratchpad.llm.messages import Message
from scratchpad.observations import ObservationStore
from scratchpad.runtime import manager as manager_module
from scratchpad.runtime.cell import Cell
from scratchpad.runtime.history import CellHistory
from scratchpad.runtime.local import LocalRuntime
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.runtime.rescrub import rescrub_home
from scratchpad.scrub import scrubber
from scratchpad.vault.store import Vault

SECRET = 'pa"ss\\w0rd-Zq9'  # JSON and repr escape it: the forms nest in a history line
NAME = "DS_X__PASSWORD"
LABEL = f"[{NAME}]"
PRINT_IT = (
    f"s = {SECRET!r}\n"
    "import base64\n"
    "print(s)\n"
    "print(base64.b64encode(s.encode()).decode())\n"
    "print(s.encode().hex())\n"
)


def forms(secret: str) -> list[bytes]:
    raw = secret.encode()
    in_json = json.dumps(repr(secret))[1:-1]  # the code of a cell in a history line
    in_json_in_json = json.dumps(in_json)[1:-1]  # a tool's input in the episodic log
    texts = [secret, json.dumps(secret)[1:-1], repr(secret)[1:-1], in_json, in_json_in_json]
    return [t.encode() for t in texts] + [base64.b64encode(raw), raw.hex().encode()]


def leaks(home: Path, secret: str) -> list[str]:
    """Files under ``home`` holding ``secret`` in any of its forms."""
    found = []
    for path in home.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            found += [f"{path}: {form!r}" for form in forms(secret) if form in data]
    return found


def identity(path: Path) -> tuple[int, int]:
    info = path.stat()
    return info.st_ino, info.st_mtime_ns


def stopped_pad(home: Path, name: str, *cells: Cell) -> Path:
    """A pad that is not running: only its directory and history on disk."""
    history = CellHistory(home / "pads" / name / "history.jsonl", 1 << 20)
    for cell in cells:
        history.append(cell)
    history.close()
    return history.path


async def test_rescrub_leaves_no_secret_under_the_home(manager: ScratchpadManager) -> None:
    home = manager.settings.home
    pad = await manager.get_or_create("main")
    first = await pad.execute(PRINT_IT)
    assert first.ok and SECRET in first.stdout
    assert isinstance(pad, LocalRuntime)
    await pad._slot.scans.settle()  # its new blob checked while the secret is still unknown
    old = stopped_pad(home, "old", Cell(code="x", stdout=f"line\n{SECRET}\nmore", id="c1"))
    plain = stopped_pad(home, "plain", Cell(code="1 + 1", result="2"))
    main = home / "pads" / "main" / "history.jsonl"
    with ObservationStore(settings=manager.settings) as store:
        entry = store.put(f"{SECRET}\n" * 5000, turn_id="turn-1", metadata={"pw": SECRET})
    secret_session = SessionFiles(home / "sessions", "s1", lambda text: text)
    secret_session.save_history([Message.user(f"my password is {SECRET}"), Message.assistant("ok")])
    secret_session.log("tool", input={"code": PRINT_IT}, result=first.stdout)
    plain_session = SessionFiles(home / "sessions", "s2", lambda text: text)
    plain_session.save_history([Message.user("hello")])
    plain_session.log("tool", input="nothing", result="secret-free")
    untouched = [plain, plain_session.history_path, plain_session.log_path]
    before = {path: identity(path) for path in untouched}
    assert leaks(home, SECRET)

    assert scrubber().add(SECRET, NAME)
    report = await manager.rescrub()

    assert leaks(home, SECRET) == []
    assert report.files_changed == 5  # main's and old's histories, s1's history and log,
    # and the blob of main's checkpoint that held the secret (dropped: pickles are not edited)
    assert (report.entries_checked, report.entries_changed) == (1, 1)
    assert report.cells_changed == 1 and report.failed == []
    for path in (main, old, secret_session.history_path):
        assert LABEL.encode() in path.read_bytes()
    assert LABEL in secret_session.log_path.read_text()
    assert {path: identity(path) for path in untouched} == before
    for path in home.rglob("*"):
        if path.parent.name == "sessions" or path.name == "history.jsonl":
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path

    assert LABEL in pad.view() and SECRET not in pad.dump()
    assert pad.cells[0].id == first.id and LABEL in pad.cells[0].stdout
    after = await pad.execute("print('after the rewrite')")
    assert [cell.id for cell in CellHistory(main, 1 << 20).load()] == [first.id, after.id]
    stopped = manager.peek("old")
    await stopped.load_cells()
    assert stopped.cells[0].stdout == f"line\n{LABEL}\nmore" and LABEL in stopped.view()
    assert secret_session.load_history()[0].text == f"my password is {LABEL}"
    with ObservationStore(settings=manager.settings) as store:
        assert store.get(entry, turn_id="turn-1").content == f"{LABEL}\n" * 5000
        assert store.info(entry).metadata == {"pw": LABEL}

    again = await manager.rescrub()
    assert (again.files_changed, again.entries_changed, again.cells_changed) == (0, 0, 0)


async def test_a_stopped_pad_starts_after_the_rescrub_and_appends(
    manager: ScratchpadManager,
) -> None:
    old = stopped_pad(manager.settings.home, "old", Cell(code=f"print({SECRET!r})", id="c1"))
    scrubber().add(SECRET, NAME)
    rescrub = asyncio.create_task(manager.rescrub())
    for _ in range(100):  # until its history is being rewritten (a start then waits for it)
        if "old" in manager._stopping or rescrub.done():
            break
        await asyncio.sleep(0)
    pad = await manager.get_or_create("old")
    await rescrub
    cell = await pad.execute("print('later')")
    assert SECRET.encode() not in old.read_bytes()
    assert [c.id for c in CellHistory(old, 1 << 20).load()] == ["c1", cell.id]


def test_rescrub_home_without_a_manager(tmp_path: Path) -> None:
    home = tmp_path / "home"
    history = stopped_pad(home, "p", Cell(code="x", stdout=SECRET))
    scrubber().add(SECRET, NAME)
    report = rescrub_home(Settings.load(home=home))
    assert (report.files_checked, report.files_changed) == (1, 1)
    assert not (home / "observations.db").exists()  # nothing is created
    assert SECRET not in CellHistory(history, 1 << 20).load()[0].stdout


def test_a_results_rich_forms_are_scrubbed_again(tmp_path: Path) -> None:
    home = tmp_path / "home"
    html = f"<td>{SECRET}</td>"
    history = stopped_pad(home, "p", Cell(code="df", result="df", result_data={"text/html": html}))
    scrubber().add(SECRET, NAME)
    rescrub_home(Settings.load(home=home))
    assert leaks(home, SECRET) == []
    (cell,) = CellHistory(history, 1 << 20).load()
    assert cell.result_data == {"text/html": f"<td>{LABEL}</td>"} and cell.number == 1


async def saved_secret_rescrubbed(
    manager: ScratchpadManager, monkeypatch: pytest.MonkeyPatch
) -> list[asyncio.Task[None]]:
    """A secret saved in the manager's vault; the background tasks it started, ended."""
    tasks: list[asyncio.Task[None]] = []
    track = manager._track

    def tracked(task: asyncio.Task[None]) -> None:
        tasks.append(task)
        track(task)

    monkeypatch.setattr(manager, "_track", tracked)
    manager.vault.save("x", "prod", {"password": SECRET}, secure_keys=["password"])
    await manager.rotations_done()
    assert tasks and all(task.done() for task in tasks)
    return tasks


@pytest.fixture
async def vault_manager(settings: Settings, tmp_path: Path) -> AsyncIterator[ScratchpadManager]:
    vault = Vault(settings, keyring=None)
    manager = ScratchpadManager(workspace=tmp_path / "ws", settings=settings, vault=vault)
    yield manager
    await manager.close_all()


async def test_a_damaged_observation_store_is_reported_and_the_rest_is_scrubbed(
    vault_manager: ScratchpadManager,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = vault_manager.settings
    history = stopped_pad(settings.home, "old", Cell(code="x", stdout=SECRET))
    settings.observations_path.write_bytes(b"not a database at all " * 100)
    tasks = await saved_secret_rescrubbed(vault_manager, monkeypatch)
    assert all(task.exception() is None for task in tasks)
    assert SECRET not in CellHistory(history, 1 << 20).load()[0].stdout
    [record] = [r for r in caplog.records if "observation store" in r.getMessage()]
    assert record.levelname == "ERROR" and str(settings.observations_path) in record.getMessage()
    assert "scrubbing stored text again failed for" in caplog.text  # the report's list
    report = rescrub_home(settings)
    assert report.failed == [str(settings.observations_path)]


async def test_a_background_rescrub_that_raises_is_logged_not_left_unretrieved(
    vault_manager: ScratchpadManager,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the disk went away")

    monkeypatch.setattr(manager_module, "rescrub_home", broken)
    tasks = await saved_secret_rescrubbed(vault_manager, monkeypatch)
    assert all(task.exception() is None for task in tasks)  # nothing left for the loop
    [record] = [r for r in caplog.records if "scrubbing stored text again" in r.getMessage()]
    assert record.levelname == "ERROR" and record.exc_info is not None
    assert "the disk went away" in caplog.text
