"""The pad trust boundary, tried the way a hostile cell would (README, Trust model): no code
of the pad runs outside its sandbox, no device or terminal of the machine, no process of it
outlives its kernel; as root and as an unprivileged user."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from scratchpad.config import Settings
from scratchpad.runtime import confinement, launcher, sandboxing
from scratchpad.runtime.local import LocalRuntime
from scratchpad.runtime.manager import ScratchpadManager
from tests.runtime.attacks import (
    gone,
    interpreter_swap,
    processes_with,
    strays_after,
    terminals_and_devices,
)
from tests.unprivileged import unprivileged

ROUNDS = 40  # restarts while the interpreter is swapped (each one a chance for the race)


def namespaces_work(settings: Settings) -> bool:
    return confinement.support(settings).namespaces


# -- 1. nothing of the pad runs outside its sandbox -------------------------------------------
async def test_the_kernel_is_the_hosts_interpreter_started_isolated(
    manager: ScratchpadManager,
) -> None:
    pad = await manager.get_or_create("main")
    assert isinstance(pad, LocalRuntime) and pad.pid is not None
    assert os.path.realpath(f"/proc/{pad.pid}/exe") == sandboxing.BASE_PYTHON
    argv = Path(f"/proc/{pad.pid}/cmdline").read_bytes().split(b"\0")
    assert argv[1:5] == [b"-I", b"-S", b"-X", b"utf8"]
    cell = await pad.execute("import sys\n(sys.flags.isolated, sys.executable)")
    assert cell.result == repr((1, str(pad.root / "bin" / "python")))


async def test_a_pad_swapping_its_interpreter_never_runs_outside_as_root(tmp_path: Path) -> None:
    """The race of item 1: the server never executes anything of the pad's, so however the
    swaps and the restarts interleave, the payload never runs outside."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    assert await interpreter_swap(tmp_path / "home", workspace, ROUNDS) == []


def test_a_pad_swapping_its_interpreter_never_runs_outside_as_a_user() -> None:
    assert unprivileged("interpreter_swap", ROUNDS) == []


# -- 4. devices, terminals, identity ---------------------------------------------------------------
@pytest.fixture
def terminal() -> Iterator[tuple[int, str]]:
    """A pseudo-terminal of this user (what a person types into)."""
    leader, follower = os.openpty()
    yield follower, os.ttyname(follower)
    os.close(leader)
    os.close(follower)


async def test_a_pad_opens_no_terminal_or_disk_of_the_machine(
    tmp_path: Path, terminal: tuple[int, str], settings: Settings
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    seen = await terminals_and_devices(tmp_path / "home", workspace, terminal[1])
    listing = seen.pop("/dev").split()
    assert not [path for path, how in seen.items() if how == "opened"], seen
    if namespaces_work(settings):
        assert set(listing) <= {*sandboxing.HARMLESS_DEVICES, "pts", "ptmx", "fd", "stdin"} | {
            "stdout",
            "stderr",
        }


def test_an_unprivileged_users_pad_opens_none_of_their_terminals(
    terminal: tuple[int, str],
) -> None:
    os.chown(terminal[1], 65534, -1)  # the user's own terminal (the pad runs as that user)
    seen = unprivileged("terminals_and_devices", terminal[1])
    assert isinstance(seen, dict)
    seen.pop("/dev")
    assert not [path for path, how in seen.items() if how == "opened"], seen


async def test_a_pad_gets_a_terminal_of_its_own(manager: ScratchpadManager) -> None:
    if not namespaces_work(manager.settings):
        pytest.skip("a terminal of the pad's own needs a private /dev (mount namespaces)")
    pad = await manager.get_or_create("main")
    cell = await pad.execute(
        "import os\nleader, follower = os.openpty()\nos.write(leader, b'hi\\n')\n"
        "os.read(follower, 3)"
    )
    assert cell.result == "b'hi\\n'", cell.error


async def test_a_root_servers_pad_is_an_unprivileged_user_without_capabilities(
    manager: ScratchpadManager,
) -> None:
    if os.geteuid() != 0 or confinement.support(manager.settings).identity is None:
        pytest.skip("pads change identity only when the server runs as root with namespaces")
    pad = await manager.get_or_create("main")
    cell = await pad.execute(
        "import os\nstatus = dict(line.split(':\\t') for line in open('/proc/self/status')"
        " .read().splitlines() if ':\\t' in line)\n"
        "caps = {k: int(v, 16) for k, v in status.items() if k.startswith('Cap')}\n"
        "try:\n    open('/etc/shadow').read(); shadow = 'read'\n"
        "except OSError as exc:\n    shadow = type(exc).__name__\n"
        "(os.getuid(), os.getgid(), os.getgroups(), caps, shadow)"
    )
    uid, gid, groups, caps, shadow = eval(cell.result or "")
    assert (uid, gid) == confinement.pad_identity(manager.settings) and groups == []
    assert caps == {"CapInh": 0, "CapPrm": 0, "CapEff": 0, "CapBnd": 0, "CapAmb": 0}
    assert shadow in ("PermissionError", "FileNotFoundError")
    made = await pad.execute("open('mine.txt', 'w').write('x')")
    assert made.status == "ok", made.error
    assert (Path(manager.workspace or "") / "mine.txt").stat().st_uid == os.geteuid()


async def test_the_home_is_hidden_not_merely_refused(manager: ScratchpadManager) -> None:
    """A pad cannot even list the home's names (vault connections, other pads)."""
    if not namespaces_work(manager.settings):
        pytest.skip("hiding the home needs mount namespaces")
    home = manager.settings.home
    (home / "vault").mkdir(parents=True)
    (home / "vault" / "postgres+prod.fernet").write_text("x")
    other = await manager.get_or_create("other")
    await other.execute("1")
    pad = await manager.get_or_create("main")
    cell = await pad.execute(
        f"import os\n(sorted(os.listdir({str(home)!r})), "
        f"sorted(os.listdir({str(home / 'pads')!r})), os.path.exists({str(home / 'vault')!r}))"
    )
    assert cell.result == "(['pads'], ['main'], False)", cell.error


@pytest.fixture
def runtime_dir() -> Iterator[Path]:
    """A directory where a pad would see it (a pad's /tmp is its own), removed after."""
    path = Path(tempfile.mkdtemp(prefix="scratchpad-run-user-", dir="/var/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


async def test_the_users_agent_sockets_are_out_of_reach(
    manager: ScratchpadManager, runtime_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An ssh-agent or D-Bus socket in the user's runtime directory: Landlock cannot refuse a
    connect, so the pad's view hides the directory."""
    if not namespaces_work(manager.settings):
        pytest.skip("hiding the runtime directory needs mount namespaces")
    agent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    agent.bind(str(runtime_dir / "ssh-agent.sock"))
    agent.listen(1)
    # as the server's own user would have it (a root server's pads run as another user, whom
    # the modes would stop anyway): the hiding is what keeps the pad out
    runtime_dir.chmod(0o755)
    (runtime_dir / "ssh-agent.sock").chmod(0o777)
    monkeypatch.setattr(sandboxing, "USER_RUNTIME_DIRS", (runtime_dir,))
    pad = await manager.get_or_create("main")
    try:
        cell = await pad.execute(
            "import os, socket\n"
            f"seen = os.path.exists({str(runtime_dir)!r}) and os.listdir({str(runtime_dir)!r})\n"
            "s = socket.socket(socket.AF_UNIX)\n"
            f"try:\n    s.connect({str(runtime_dir / 'ssh-agent.sock')!r}); reached = True\n"
            "except OSError:\n    reached = False\n"
            "(seen, reached)"
        )
    finally:
        agent.close()
    assert cell.result == "([], False)", cell.error


# -- 5. no process of a pad outlives its kernel ----------------------------------------------------
@pytest.mark.parametrize("how", ["exit", "reset", "remove"])
async def test_no_process_of_a_pad_outlives_it_as_root(
    tmp_path: Path, how: str, settings: Settings
) -> None:
    if how == "exit" and not namespaces_work(settings):
        pytest.skip("only a PID namespace holds a process that left its group and environment")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    assert await strays_after(tmp_path / "home", workspace, how) == []


@pytest.mark.parametrize("how", ["exit", "remove"])
def test_no_process_of_a_pad_outlives_it_as_a_user(how: str) -> None:
    assert unprivileged("strays_after", how) == []


def test_no_process_of_a_pad_outlives_a_killed_server(tmp_path: Path) -> None:
    from tests.server_helpers import running_server

    workspace = tmp_path / "ws"
    workspace.mkdir()
    token = f"600{os.getpid()}.77"
    with running_server(tmp_path / "home", workspace, "k" * 32) as (url, process):
        answer = httpx.post(
            f"{url}/scratchpad/execute-stream",
            json={"name": "main", "code": attacks_stray(token)},
            headers={"Authorization": "Bearer " + "k" * 32},
            timeout=60,
        )
        assert '"status": "ok"' in answer.text, answer.text
        assert processes_with(token)
        process.send_signal(signal.SIGKILL)
        process.wait()
    left = asyncio.run(gone(token))
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert left == []


def attacks_stray(token: str) -> str:
    from tests.runtime.attacks import STRAY

    return STRAY.format(token=token)


def test_the_probe_says_what_holds_here(settings: Settings) -> None:
    report = confinement.report(settings)["confinement"]
    assert set(report) >= {"landlock", "namespaces", "home", "identity", "devices", "processes"}
    if namespaces_work(settings):
        assert report["home"].startswith("hidden")
        assert report["processes"].startswith("a PID namespace")


async def test_a_root_pad_without_namespaces_is_said_to_reach_roots_sockets(
    settings: Settings, workspace: Path, tmp_path: Path
) -> None:
    """Landlock cannot refuse a ``connect``: a root server's pad without namespaces stays
    uid 0 and reaches a socket only root may (as Docker's or systemd's): the report says so."""
    alone = settings.model_copy(update={"namespaces": "off"})
    if os.geteuid() != 0 or confinement.support(alone).landlock_abi == 0:
        pytest.skip("a root server's pad under Landlock")
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(private / "s"))
        listener.listen(1)
        async with ScratchpadManager(workspace=workspace, settings=alone) as manager:
            pad = await manager.get_or_create("root")
            code = f"import socket\nsocket.socket(socket.AF_UNIX).connect({str(private / 's')!r})"
            reached = await pad.execute(code)
            identity = confinement.report(alone)["confinement"]["identity"]
    assert reached.status == "ok", reached.error
    assert "connect as root to every unix socket" in identity


# -- 2. what the server imports stays out of a pad's reach, even inside its workspace ---------
@pytest.mark.parametrize("namespaces", ["auto", "off"])
async def test_the_servers_code_inside_a_workspace_stays_read_only(
    settings: Settings, workspace: Path, monkeypatch: pytest.MonkeyPatch, namespaces: str
) -> None:
    """A workspace that holds the server's own packages (``scratchpad serve --workspace``
    over a checkout): a cell can neither change them nor move them away and plant others."""
    code = workspace / "checkout" / "site-packages"
    (code / "nbformat").mkdir(parents=True)
    (code / "nbformat" / "__init__.py").write_text("")
    (workspace / "data").mkdir()
    monkeypatch.setattr(launcher, "SERVER_PATHS", (*launcher.SERVER_PATHS, code))
    chosen = settings.model_copy(update={"namespaces": namespaces})
    manager = ScratchpadManager(workspace=workspace, settings=chosen)
    try:
        pad = await manager.get_or_create("main")
        cell = await pad.execute(
            "import os\nseen = []\n"
            "for attempt in (lambda: open('checkout/site-packages/nbformat/__init__.py', 'w'),\n"
            "                lambda: open('checkout/site-packages/planted.py', 'w'),\n"
            "                lambda: os.rename('checkout/site-packages', 'moved'),\n"
            "                lambda: os.rename('checkout', 'moved')):\n"
            "    try:\n        attempt()\n        seen.append('DONE')\n"
            "    except OSError as exc:\n        seen.append(type(exc).__name__)\n"
            "open('data/mine.txt', 'w').write('the rest is the pad\\'s')\nseen"
        )
        assert cell.status == "ok", cell.error
        assert "DONE" not in (cell.result or ""), cell.result
        assert (code / "nbformat" / "__init__.py").read_text() == ""
        assert not (code / "planted.py").exists() and (workspace / "data" / "mine.txt").exists()
    finally:
        await manager.close_all()
