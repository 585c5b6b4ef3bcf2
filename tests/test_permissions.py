"""The home directory is 0700 and every state file in it 0600, even under a permissive umask."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from scratchpad.agent.persistence import SessionFiles
from scratchpad.config import Settings
from scratchpad.fsutil import open_private_append, private_dir, touch_private
from scratchpad.llm.messages import Message
from scratchpad.observations import ObservationStore
from scratchpad.runtime import confinement, venv
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.server.auth import resolve_api_key
from scratchpad.server.state import ServerRecord, ServingLock, write_record
from tests.images import PNG
from tests.unprivileged import run_as_nobody


@pytest.fixture(autouse=True)
def permissive_umask() -> Iterator[None]:
    old = os.umask(0o022)
    yield
    os.umask(old)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "deep" / "home"  # missing parents too


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_private_dir_creates_every_missing_level_0700(tmp_path: Path) -> None:
    before = mode_of(tmp_path)
    path = private_dir(tmp_path / "a" / "b" / "c")
    for level in (tmp_path / "a", tmp_path / "a" / "b", path):
        assert mode_of(level) == 0o700, level
    assert mode_of(tmp_path) == before  # an existing parent is left alone
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    assert mode_of(private_dir(shared)) == 0o755  # existing: untouched unless asked
    assert mode_of(private_dir(shared, tighten=True)) == 0o700


def test_private_files_are_0600_and_old_ones_are_tightened(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "server.log"
    with open_private_append(log) as handle:
        handle.write(b"one\n")
    assert mode_of(log) == 0o600 and mode_of(log.parent) == 0o700
    log.chmod(0o644)  # written by an older version
    with open_private_append(log) as handle:
        handle.write(b"two\n")
    assert mode_of(log) == 0o600 and log.read_bytes() == b"one\ntwo\n"
    db = tmp_path / "x.db"
    touch_private(db)
    assert mode_of(db) == 0o600 and db.read_bytes() == b""


def test_observation_store_db_wal_and_shm_are_private(home: Path) -> None:
    with ObservationStore(settings=Settings(home=home)) as store:
        store.put("x" * 100_000, turn_id="t")
        files = {p.name: mode_of(p) for p in home.iterdir()}
        assert {"observations.db", "observations.db-wal", "observations.db-shm"} <= set(files)
        assert files == dict.fromkeys(files, 0o600)
    assert mode_of(home) == 0o700 and mode_of(home.parent) == 0o700


def test_session_history_and_episodic_log_are_private(home: Path) -> None:
    files = SessionFiles(home / "sessions", "s1", scrub=lambda text: text)
    files.log("tool_call", name="echo", input={"text": "hi"})
    files.save_history([Message.user("hello")])
    assert mode_of(files.log_path) == 0o600 and mode_of(files.history_path) == 0o600
    assert mode_of(home / "sessions") == 0o700 and mode_of(home) == 0o700


def test_server_record_lock_and_api_key_are_private(home: Path) -> None:
    settings = Settings(home=home)
    key = resolve_api_key(settings)
    assert mode_of(home) == 0o700 and mode_of(home / "api_key") == 0o600
    assert (home / "api_key").read_text() == key + "\n"
    write_record(settings, ServerRecord(pid=os.getpid(), host="127.0.0.1", port=1))
    lock = ServingLock(settings)
    assert lock.acquire()
    lock.release()
    files = {p.name: mode_of(p) for p in home.iterdir()}
    assert set(files) == {"api_key", "server.json", "server.serving.lock"}
    assert files == dict.fromkeys(files, 0o600)


def test_asking_what_confines_pads_makes_a_missing_home_private(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(confinement, "_support", {})  # probe again, in a home not made yet
    confinement.support(Settings(home=home))
    assert mode_of(home) == 0o700 and mode_of(home.parent) == 0o700
    assert list(home.iterdir()) == []  # its throwaway directory is gone


async def test_a_rebuilt_venv_keeps_its_history_private(home: Path) -> None:
    root = home / "pads" / "p"
    await venv.create(root)
    assert mode_of(home) == 0o700 and mode_of(home / "pads") == 0o700
    history = root / "history.jsonl"
    with open_private_append(history) as handle:
        handle.write(b'{"code": "1"}\n')
    await venv.create(root)  # a rebuild rewrites the kept files
    assert history.read_bytes() == b'{"code": "1"}\n' and mode_of(history) == 0o600


CHAT_CELL = (  # an image (saved by the chat) and output large enough for an observation
    "class Picture:\n"
    "    def _repr_png_(self):\n"
    f"        return bytes.fromhex({PNG.hex()!r})\n"
    "display(Picture())\n"
    "print('row\\n' * 5000)"
)
PAD_STATE = frozenset({"pad.json", "scratchpad-venv.json", "requirements.txt", "history.jsonl"})


def scratchpad(*args: str, cwd: Path, stdin: str | None = None) -> str:
    command = [sys.executable, "-m", "scratchpad.cli", *args]
    done = subprocess.run(
        command, cwd=cwd, input=stdin, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


def the_pads_own(home: Path, path: Path, workspaces: list[Path]) -> bool:
    """What the documented exception covers: inside a pad's directory, its virtualenv as the
    installer made it (everything but the server's own state files and the temp directory
    itself) and what the pad wrote in its temp directory; what it wrote in a workspace that
    lies in the home (a workspace around the home, such as the server's current directory,
    holds the home: that is no pad's)."""
    if any(home in ws.parents and ws in path.parents for ws in workspaces):
        return True
    parts = path.relative_to(home).parts
    if len(parts) < 3 or parts[0] != "pads":
        return False
    return parts[2] not in PAD_STATE | {"tmp"} or (len(parts) > 3 and parts[2] == "tmp")


def test_a_home_after_a_realistic_session_gives_nothing_to_group_or_others(
    hermetic_env: Path, tmp_path: Path, wheel: Path
) -> None:
    """Under a umask of 022: a server started, pads created, cells run (files written, an
    install), a vault connection saved, a chat whose cell leaves an observation and an image,
    the server stopped; then no entry of the home gives group or others any permission, but
    where documented (README: the home)."""
    home, work = hermetic_env, tmp_path / "work"
    work.mkdir()
    chat = tmp_path / "chat.json"
    call = {"action": "exec", "name": "a", "code": CHAT_CELL}
    chat.write_text(json.dumps([[{"name": "scratchpad", "input": call}], "Done."]))
    try:
        assert f"pad server for {home} on" in scratchpad("server", "start", cwd=work)
        scratchpad("exec", "a", "open('made.txt', 'w').write('by the pad')", cwd=work)
        scratchpad("exec", "данные/x", "import tempfile; tempfile.mkstemp()", cwd=work)
        scratchpad("install", "a", str(wheel), cwd=work)
        values = json.dumps({"host": "db.internal", "password": "s3cret-value-of-pg"})
        scratchpad("vault", "add", "postgres", "--stdin", cwd=work, stdin=values)
        scratchpad("chat", "--model", f"scripted:{chat}", cwd=work, stdin="go\n/exit\n")
    finally:
        scratchpad("server", "stop", cwd=work)
    names = ["a", "данные/x"]
    manager = ScratchpadManager(settings=Settings(home=home))  # reads, starts nothing
    workspaces = [manager.workspace_of(name).resolve() for name in names]
    for made in ("sessions", "chat-images", "observations.db", "vault", "server.log"):
        assert (home / made).exists(), made  # the session really left all of these
    assert len(list(home.glob("pads/*/requirements.txt"))) == 1
    exposed = exposed_entries(home, workspaces)
    assert not exposed, "\n".join(f"{mode} {path}" for path, mode in sorted(exposed.items()))


def exposed_entries(home: Path, workspaces: list[Path]) -> dict[str, str]:
    """Entries of ``home`` that give group or others a permission, but the pads' own."""
    return {
        str(path.relative_to(home)): oct(stat.S_IMODE(path.lstat().st_mode))
        for path in [home, *home.rglob("*")]
        if not path.is_symlink()
        and stat.S_IMODE(path.lstat().st_mode) & 0o077
        and not the_pads_own(home, path, workspaces)
    }


def test_an_unprivileged_servers_home_is_private_too_and_its_pads_still_start(
    wheel: Path,
) -> None:
    """As nobody (no root, no identity switch for pads): the same modes, and a kernel started
    again from the now private pad directory still finds its venv and what was installed."""
    done = run_as_nobody(
        f"""
        import asyncio, json, os
        from pathlib import Path
        from scratchpad.runtime.manager import ScratchpadManager
        from tests.test_permissions import exposed_entries

        os.umask(0o022)

        async def session():
            async with ScratchpadManager() as manager:
                pad = await manager.get_or_create("a")
                await pad.execute("open('made.txt', 'w').write('by the pad')")
                await pad.install_packages([{str(wheel)!r}])
                await manager.close("a")
                pad = await manager.get_or_create("a")  # a new kernel
                cell = await pad.execute("import sp_demo_pkg; sp_demo_pkg.VERSION")
                return cell.result, manager.workspace_of("a").resolve()

        result, workspace = asyncio.run(session())
        exposed = exposed_entries(Path.cwd() / "home", [workspace])
        print("ANSWER", json.dumps({{"result": result, "exposed": exposed}}))
        """,
        timeout=300,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("ANSWER ")]
    assert lines, done.stdout + done.stderr
    answer = json.loads(lines[-1].removeprefix("ANSWER "))
    assert answer == {"result": "'1.0'", "exposed": {}}
