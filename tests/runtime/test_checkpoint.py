"""Checkpoints of a pad's variables and their restore after a kernel death, with real
confined kernels (see runtime/checkpoint.py and inkernel/checkpoint.py)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from scratchpad.config import Settings
from scratchpad.runtime import checkpoint
from scratchpad.runtime.local import LocalRuntime
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.scrub import register, scrubber
from tests.process_helpers import process_gone

SRC = Path(__file__).resolve().parents[2] / "src" / "scratchpad"
DEADLINE_S = 20.0


@pytest.fixture
async def pad(manager: ScratchpadManager) -> AsyncIterator[LocalRuntime]:
    runtime = await manager.get_or_create("ck")
    assert isinstance(runtime, LocalRuntime)
    yield runtime


def ckdir(pad: LocalRuntime) -> Path:
    return checkpoint.directory(pad.root)


async def saved(pad: LocalRuntime, number: int) -> None:
    """Until the checkpoint after cell ``number`` is on disk (its writer is a thread)."""
    head = ckdir(pad) / "HEAD"
    deadline = asyncio.get_running_loop().time() + DEADLINE_S
    while not (head.is_file() and head.read_text() == str(number)):
        assert asyncio.get_running_loop().time() < deadline, f"no checkpoint after {number}"
        await asyncio.sleep(0.01)


async def kill(pad: LocalRuntime) -> None:
    pid = pad.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    while not process_gone(pid):  # noqa: ASYNC110 - dead, not yet reported by the pipes
        await asyncio.sleep(0.001)


def blobs(pad: LocalRuntime) -> set[str]:
    return {path.name for path in (ckdir(pad) / "blobs").iterdir()}


def manifests(pad: LocalRuntime) -> set[str]:
    return {path.name for path in (ckdir(pad) / "manifests").iterdir()}


async def test_a_killed_kernel_comes_back_with_its_variables_and_a_report(
    pad: LocalRuntime, workspace: Path
) -> None:
    (workspace / "agentmod.py").write_text(
        "class Thing:\n    def __init__(self):\n        self.v = 42\n"
    )
    first = await pad.execute(
        "import json as j\nfrom collections import OrderedDict\nimport agentmod\n"
        "thing = agentmod.Thing()\na = [1, 2]\nb = a\nx = 5\n"
        "def f():\n    return x * 2\n"
        "import socket, threading\ns = socket.socket()\ng = (i for i in range(3))\n"
        "lock = threading.Lock()\n"
    )
    assert first.status == "ok" and first.error is None
    for line in (
        "s: not saved (open socket)",
        "g: not saved (generator)",
        "lock: not saved (lock)",
    ):
        assert line in first.logs
    await saved(pad, first.number)
    await kill(pad)
    after = await pad.execute(
        "x = 7\nb.append(3)\n"
        "(a is b, a, f(), j.dumps(OrderedDict(q=1)), thing.v, 's' in dir(), 'g' in dir())"
    )
    assert after.status == "ok", after.error
    assert after.result == "(True, [1, 2, 3], 14, '{\"q\": 1}', 42, False, False)"
    logs = after.logs
    assert "this is a fresh kernel. It restored the variables saved after cell 1" in logs
    assert re.search(r"Restored: .*\ba\b", logs) and "thing" in logs
    assert "Imports replayed: " in logs and "OrderedDict" in logs
    assert "s (never saved: open socket; defined in cell 1: re-run it)" in logs
    assert "g (never saved: generator; defined in cell 1" in logs


async def test_files_are_private_and_the_format_is_recorded(pad: LocalRuntime) -> None:
    cell = await pad.execute("a = list(range(10))")
    await saved(pad, cell.number)
    root = ckdir(pad)
    assert json.loads((root / "FORMAT").read_text()) == {"format": 1}
    for path in [root, *root.rglob("*")]:
        assert path.stat().st_mode & 0o777 == (0o700 if path.is_dir() else 0o600), path
    manifest = checkpoint.read_manifest(pad.root)
    assert manifest is not None and manifest["vars"]["a"]["defined_in"]["number"] == cell.number
    assert manifest["vars"]["a"]["ser"].startswith("cloudpickle ")


async def test_file_handles_are_never_saved_nor_reopened(pad: LocalRuntime, scratch: Path) -> None:
    target, other = scratch / "kept.txt", scratch / "open.txt"
    cell = await pad.execute(
        f"fh = open({str(target)!r}, 'w')\nfh.write('precious')\nfh.close()\n"
        f"handles = [fh, 1]\nopen_one = open({str(other)!r}, 'w')\nopen_one.write('also')\n"
        "open_one.flush()\nkeep = 3\n"
    )
    assert "fh: not saved (open file handle)" in cell.logs
    assert "handles: not saved (open file handle)" in cell.logs
    assert "open_one: not saved (open file handle)" in cell.logs
    await saved(pad, cell.number)
    await kill(pad)
    after = await pad.execute("keep, 'handles' in dir()")
    assert after.result == "(3, False)"
    assert target.read_text() == "precious" and other.read_text() == "also"


async def test_incremental_unchanged_values_are_not_written_again(pad: LocalRuntime) -> None:
    first = await pad.execute("a = [1]\nb = {'k': 2}\nn = 1")
    await saved(pad, first.number)
    before, listed = blobs(pad), manifests(pad)
    nothing = await pad.execute("1+1")
    assert nothing.status == "ok"
    await asyncio.sleep(0.2)  # a write would be a thread's: give it the time it would take
    assert manifests(pad) == listed and blobs(pad) == before
    changed = await pad.execute("b['k'] = 3")
    await saved(pad, changed.number)
    new = blobs(pad) - before
    assert len(new) == 1  # b's value only: a is not written again
    manifest = checkpoint.read_manifest(pad.root)
    assert manifest is not None
    assert manifest["vars"]["a"]["blob"] + ".pkl" in before
    assert manifest["vars"]["b"]["defined_in"]["number"] == first.number


async def test_a_helper_that_mutates_a_global_is_seen(pad: LocalRuntime) -> None:
    first = await pad.execute("data = []\ndef add(v):\n    data.append(v)\n")
    await saved(pad, first.number)
    second = await pad.execute("add(5)")
    await saved(pad, second.number)
    await kill(pad)
    assert (await pad.execute("data")).result == "[5]"


async def test_aliasing_survives_inside_containers(pad: LocalRuntime) -> None:
    cell = await pad.execute("shared = {'n': 1}\nholder = [shared, shared]\nother = (shared,)")
    await saved(pad, cell.number)
    await kill(pad)
    after = await pad.execute("holder[0] is shared and other[0] is shared and holder[1] is shared")
    assert after.result == "True"
    manifest = checkpoint.read_manifest(pad.root)
    assert manifest is not None
    assert len({manifest["vars"][n]["blob"] for n in ("shared", "holder", "other")}) == 1


async def test_removed_names_leave_the_checkpoint(pad: LocalRuntime) -> None:
    await pad.execute("gone = [1]\nstays = [2]")
    cell = await pad.execute("del gone")
    await saved(pad, cell.number)
    await kill(pad)
    assert (await pad.execute("'gone' in dir(), stays")).result == "(False, [2])"


@pytest.fixture
def small_caps(settings: Settings) -> Settings:
    return settings.model_copy(update={"checkpoint_var_mb": 1})


async def test_a_value_over_the_cap_is_reported_and_the_others_saved(
    workspace: Path, small_caps: Settings
) -> None:
    manager = ScratchpadManager(workspace=workspace, settings=small_caps)
    try:
        pad = await manager.get_or_create("capped")
        assert isinstance(pad, LocalRuntime)
        cell = await pad.execute("big = bytes(2 * 1024 * 1024)\nsmall = 'ok'")
        assert "big: not saved (over the 1 MB cap per variable)" in cell.logs
        await saved(pad, cell.number)
        await kill(pad)
        after = await pad.execute("small, 'big' in dir()")
        assert after.result == "('ok', False)"
        assert "big (never saved: over the 1 MB cap per variable" in after.logs
    finally:
        await manager.close_all()


async def test_checkpoints_off_writes_nothing_and_restores_nothing(
    workspace: Path, settings: Settings
) -> None:
    off = settings.model_copy(update={"checkpoint_pad_mb": 0})
    manager = ScratchpadManager(workspace=workspace, settings=off)
    try:
        pad = await manager.get_or_create("off")
        assert isinstance(pad, LocalRuntime)
        await pad.execute("a = 1")
        assert not checkpoint.directory(pad.root).exists()
        await kill(pad)
        after = await pad.execute("'a' in dir()")
        assert after.result == "False" and "all variables from before were lost" in after.logs
        died = await pad.execute("import os\nos._exit(3)")
        assert died.status == "killed" and died.error is not None
        assert "; all variables were lost. The next cell starts a fresh kernel." in died.error
    finally:
        await manager.close_all()


async def test_a_newer_format_is_refused_with_a_clear_message(pad: LocalRuntime) -> None:
    cell = await pad.execute("a = 1")
    await saved(pad, cell.number)
    (ckdir(pad) / "FORMAT").write_text(json.dumps({"format": 99}))
    await kill(pad)
    after = await pad.execute("'a' in dir()")
    assert after.result == "False"
    assert "written by a newer Scratchpad (format 99); upgrade or reset" in after.logs
    blobs_before = blobs(pad)
    later = await pad.execute("b = [2]")  # nothing of ours is written into it
    assert later.status == "ok"
    deadline = asyncio.get_running_loop().time() + DEADLINE_S
    while "newer Scratchpad (format 99)" not in (await pad.execute("1")).logs:  # told late
        assert asyncio.get_running_loop().time() < deadline
    assert blobs(pad) == blobs_before


async def test_reset_deletes_the_checkpoint(pad: LocalRuntime) -> None:
    cell = await pad.execute("a = 1")
    await saved(pad, cell.number)
    await pad.reset()
    assert not checkpoint.exists(pad.root)
    await kill(pad)
    after = await pad.execute("'a' in dir()")
    assert after.result == "False" and "restored" not in after.logs


async def test_a_value_whose_load_kills_the_kernel_is_set_aside(pad: LocalRuntime) -> None:
    cell = await pad.execute(
        "import os\nclass Bomb:\n    def __reduce__(self):\n        return (os._exit, (3,))\n"
        "bomb = Bomb()\nfine = 1\n"
    )
    await saved(pad, cell.number)
    await kill(pad)
    after = await pad.execute("'fine' in dir(), 'bomb' in dir()")
    assert after.status == "ok", after.error
    assert after.result == "(False, False)"
    assert "restoring its variables killed the kernel" in after.logs
    assert (pad.root / "checkpoint.failed-1" / "HEAD").is_file()
    assert not checkpoint.exists(pad.root)
    again = await pad.execute("z = 1")  # the pad goes on checkpointing afresh
    await saved(pad, again.number)


async def test_the_server_side_asks_for_a_full_sweep(pad: LocalRuntime, scratch: Path) -> None:
    go, done = scratch / "go", scratch / "done"
    cell = await pad.execute(  # the thread changes box once the cell's checkpoint is taken
        "import os, threading, time\nbox = []\n"
        "def later():\n"
        f"    while not os.path.exists({str(go)!r}):\n        time.sleep(0.01)\n"
        f"    box.append(1)\n    open({str(done)!r}, 'w').close()\n"
        "threading.Thread(target=later).start()"
    )
    await saved(pad, cell.number)
    go.touch()
    deadline = asyncio.get_running_loop().time() + DEADLINE_S
    while not done.exists():
        assert asyncio.get_running_loop().time() < deadline, "the thread never ran"
        await asyncio.sleep(0.01)
    kernel = pad.kernel
    assert kernel is not None
    async with pad._lock:
        outcome = await checkpoint.checkpoint_all(kernel, 10.0, lambda kind, payload: None)
    assert outcome.get("wrote", 0) >= 1, outcome
    await saved(pad, cell.number)
    await kill(pad)
    after = await pad.execute("box")
    assert after.result == "[1]"
    assert f"saved after cell {cell.number}." in after.logs  # a sweep is not a cell


async def test_close_saves_what_a_thread_changed_after_the_last_cell(
    manager: ScratchpadManager, pad: LocalRuntime
) -> None:
    code = (
        "import threading, time\nbox = []\n"
        "def later():\n    time.sleep(0.2)\n    box.append(1)\n    open('mutated', 'w').close()\n"
        "threading.Thread(target=later).start()"
    )
    cell = await pad.execute(code)
    await saved(pad, cell.number)  # box saved empty, with its cell
    deadline = asyncio.get_running_loop().time() + DEADLINE_S
    while not (pad.cwd / "mutated").exists():
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.01)
    await manager.close("ck")  # an idle kernel: a full sweep before it stops
    again = await manager.get_or_create("ck")
    after = await again.execute("box")
    assert after.result == "[1]", after.logs
    assert f"It restored the variables saved after cell {cell.number}." in after.logs


async def test_a_cell_stopped_by_close_says_the_last_finished_cells_variables_come_back(
    manager: ScratchpadManager, pad: LocalRuntime
) -> None:
    await saved(pad, (await pad.execute("kept = [1]")).number)
    running = asyncio.create_task(pad.execute("import time\nkept.append(2)\ntime.sleep(30)"))
    while not pad.busy:  # noqa: ASYNC110 - a plain property
        await asyncio.sleep(0.01)
    await manager.close("ck")
    stopped = await running
    assert stopped.status == "killed" and stopped.error is not None
    assert stopped.error.startswith("Cell stopped: the pad was closed while it ran; what it ")
    assert "the variables saved after the last finished cell are restored" in stopped.error
    again = await manager.get_or_create("ck")
    assert (await again.execute("kept")).result == "[1]"


async def test_each_manifest_records_the_generation_of_its_kernel(pad: LocalRuntime) -> None:
    def head() -> dict[str, object]:
        found = checkpoint.read_manifest(pad.root)
        assert found is not None
        return found

    first = await pad.execute("a = [1]")
    await saved(pad, first.number)
    assert head()["generation"] == pad.generation == 1
    await kill(pad)
    second = await pad.execute("b = [2]")
    await saved(pad, second.number)
    assert head()["generation"] == pad.generation == 2


async def test_equal_values_of_two_names_come_back_as_two_objects(pad: LocalRuntime) -> None:
    """Equal values pickle to the same bytes, so they share one blob: both names come back,
    each with its own object (no aliasing made up)."""
    cell = await pad.execute("x = 3\ny = 3\nl1 = [1]\nl2 = [1]")
    await saved(pad, cell.number)
    await kill(pad)
    after = await pad.execute("(x, y, l1, l2, l1 is l2)")
    assert after.result == "(3, 3, [1], [1], False)", after.logs


def test_the_server_never_unpickles() -> None:
    """Only a pad's kernel, inside its sandbox, loads a checkpoint (see runtime/checkpoint.py)."""
    loads = re.compile(
        r"\b(pickle|cPickle|dill|cloudpickle|_pickle)\s*\.\s*(load|loads|Unpickler)\b"
    )
    imports = re.compile(r"^\s*(from|import)\s+(pickle|dill|cloudpickle|_pickle)\b", re.M)
    offenders = []
    for path in SRC.rglob("*.py"):
        if "inkernel" in path.relative_to(SRC).parts:
            continue
        text = path.read_text()
        if loads.search(text) or imports.search(text):
            offenders.append(str(path.relative_to(SRC)))
    assert offenders == []


@pytest.mark.parametrize("mode", ["namespaces", "landlock alone", "sandbox off"])
async def test_every_confinement_reaches_the_serializers_and_its_checkpoint(
    workspace: Path, settings: Settings, mode: str
) -> None:
    """The host's cloudpickle is found through the kernel's finder (and nothing else of that
    site directory), the checkpoint directory is writable, in every mode."""
    update = {"namespaces": "off"} if mode == "landlock alone" else {}
    update = {"sandbox": "off"} if mode == "sandbox off" else update
    manager = ScratchpadManager(workspace=workspace, settings=settings.model_copy(update=update))
    try:
        pad = await manager.get_or_create("modes")
        assert isinstance(pad, LocalRuntime)
        cell = await pad.execute(FINDER_ONLY + "value = {'n': [1, 2]}\n" + FINDER_ANSWER)
        assert cell.status == "ok", cell.error
        assert cell.result == "(True, True, True)"  # the host's other packages stay out
        await saved(pad, cell.number)
        await kill(pad)
        assert (await pad.execute("value")).result == "{'n': [1, 2]}"
    finally:
        await manager.close_all()


# Without the host's site directories on sys.path (the pad's venv sees them through a .pth
# file; a venv without it must still checkpoint): the kernel's finder answers the serializers
# and nothing else of them.
FINDER_ONLY = """
import sys, importlib, importlib.util
for _m in [m for m in sys.modules if m.split('.')[0] in ('cloudpickle', 'dill')]:
    del sys.modules[_m]
sys.path[:] = [p for p in sys.path if 'site-packages' not in p]
importlib.invalidate_caches()
import cloudpickle, dill
"""
FINDER_ANSWER = (
    "(importlib.util.find_spec('pydantic') is None, 'site-packages' in cloudpickle.__file__,"
    " 'site-packages' in dill.__file__)"
)


def test_a_server_run_by_an_unprivileged_user_restores(tmp_path: Path) -> None:
    """As an ordinary user (nobody): the serializers readable, the checkpoint written and
    loaded back after a kill (see tests/unprivileged.py)."""
    from tests.unprivileged import run_as_nobody

    done = run_as_nobody(UNPRIVILEGED, timeout=180)
    assert done.stdout.strip().endswith("restored [1, 2] True"), done.stdout + done.stderr


UNPRIVILEGED = """
import asyncio, os, signal, time
from pathlib import Path
from scratchpad.config import Settings
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.scrub import register, scrubber

async def main():
    workspace = Path.cwd() / "ws"
    workspace.mkdir()
    manager = ScratchpadManager(workspace=workspace, settings=Settings(home=Path.cwd() / "home"))
    pad = await manager.get_or_create("p")
    cell = await pad.execute("a = [1, 2]")
    head = pad.root / "checkpoint" / "HEAD"
    deadline = time.monotonic() + 20
    while not (head.is_file() and head.read_text() == str(cell.number)):
        assert time.monotonic() < deadline, cell.logs
        await asyncio.sleep(0.01)
    pid = pad.pid
    os.kill(pid, signal.SIGKILL)
    while os.path.exists(f"/proc/{pid}") and "Z" not in open(f"/proc/{pid}/stat").read().split()[2]:
        await asyncio.sleep(0.01)
    after = await pad.execute("a")
    print("restored", after.result, "It restored the variables" in after.logs, after.logs[:0])
    await manager.close_all()

asyncio.run(main())
"""


async def test_dill_saves_what_cloudpickle_cannot(pad: LocalRuntime) -> None:
    cell = await pad.execute(
        "import weakref\nclass Node:\n    pass\nnode = Node()\nref = weakref.ref(node)"
    )
    assert cell.logs == ""
    await saved(pad, cell.number)
    manifest = checkpoint.read_manifest(pad.root)
    assert manifest is not None and manifest["vars"]["ref"]["ser"].startswith("dill ")
    await kill(pad)
    assert (await pad.execute("ref() is node")).result == "True"


@pytest.fixture
def quick_restore(settings: Settings) -> Settings:
    return settings.model_copy(update={"restore_timeout_s": 1.0})


async def test_a_restore_that_hangs_is_given_up_and_set_aside(
    workspace: Path, quick_restore: Settings
) -> None:
    manager = ScratchpadManager(workspace=workspace, settings=quick_restore)
    try:
        pad = await manager.get_or_create("hangs")
        assert isinstance(pad, LocalRuntime)
        cell = await pad.execute(
            "import time\nclass Slow:\n    def __reduce__(self):\n"
            "        return (time.sleep, (600,))\nslow = Slow()\nother = 1"
        )
        await saved(pad, cell.number)
        await kill(pad)
        after = await pad.execute("'other' in dir()")
        assert after.status == "ok" and after.result == "False"
        assert "restoring its variables did not finish in time" in after.logs
        assert (pad.root / "checkpoint.failed-1").is_dir()
    finally:
        await manager.close_all()


async def test_two_deaths_in_a_row_skip_the_restore(pad: LocalRuntime) -> None:
    """A restored value may be what kills the kernel: after two deaths in a row the next
    kernel starts empty and the checkpoint is set aside."""
    cell = await pad.execute("kept = [1]")
    await saved(pad, cell.number)
    for _ in range(2):
        died = await pad.execute("import os\nos._exit(9)")
        assert died.status == "killed"
    after = await pad.execute("'kept' in dir()")
    assert after.result == "False"
    assert "died twice in a row, so its variables were not restored" in after.logs
    assert (pad.root / "checkpoint.failed-1" / "HEAD").is_file()


async def test_a_rebuilt_virtualenv_keeps_the_checkpoint(pad: LocalRuntime) -> None:
    from scratchpad.runtime import venv

    cell = await pad.execute("kept = {'a': 1}")
    await saved(pad, cell.number)
    await pad.close()
    await venv.create(pad.root, pad.name)
    await pad.start()
    assert (await pad.execute("kept")).result == "{'a': 1}"


async def test_sys_path_additions_come_back_for_the_load_and_after(
    pad: LocalRuntime, scratch: Path
) -> None:
    lib = scratch / "lib"
    lib.mkdir()
    (lib / "libmod.py").write_text(
        "class Box:\n    def __init__(self):\n        self.v = 'in lib'\n"
    )
    cell = await pad.execute(
        f"import sys\nsys.path.append({str(lib)!r})\nimport libmod\nbox = libmod.Box()"
    )
    await saved(pad, cell.number)
    await kill(pad)
    after = await pad.execute(f"box.v, libmod.__name__, {str(lib)!r} in sys.path")
    assert after.result == "('in lib', 'libmod', True)", after.logs


async def test_another_pad_cannot_read_a_checkpoint(manager: ScratchpadManager) -> None:
    owner = await manager.get_or_create("owner")
    assert isinstance(owner, LocalRuntime)
    cell = await owner.execute("secret = 'value'")
    await saved(owner, cell.number)
    other = await manager.get_or_create("other")
    peek = await other.execute(
        f"import os\ntry:\n    os.listdir({str(ckdir(owner) / 'blobs')!r})\n"
        "    seen = 'read'\nexcept OSError:\n    seen = 'refused'\nseen"
    )
    assert peek.result == "'refused'", peek.stdout


async def test_state_held_in_a_closure_is_saved_when_the_closure_is_called(
    pad: LocalRuntime,
) -> None:
    first = await pad.execute(
        "def make():\n    seen = []\n    def add(v):\n        seen.append(v)\n"
        "        return len(seen)\n    return add\nadd = make()"
    )
    await saved(pad, first.number)
    second = await pad.execute("add(1)\nadd(2)")
    await saved(pad, second.number)
    await kill(pad)
    assert (await pad.execute("add(3)")).result == "3"


async def test_past_the_pads_cap_the_largest_new_values_are_dropped(
    workspace: Path, settings: Settings
) -> None:
    capped = settings.model_copy(update={"checkpoint_pad_mb": 1})
    manager = ScratchpadManager(workspace=workspace, settings=capped)
    try:
        pad = await manager.get_or_create("padcap")
        assert isinstance(pad, LocalRuntime)
        cell = await pad.execute("first = bytes(600_000)\nsecond = bytes(700_000)\nsmall = 1")
        assert "second: not saved (over the pad's 1 MB checkpoint cap)" in cell.logs
        assert "first:" not in cell.logs
        await saved(pad, cell.number)
        await kill(pad)
        after = await pad.execute("len(first), small, 'second' in dir()")
        assert after.result == "(600000, 1, False)"
    finally:
        await manager.close_all()


async def test_a_value_holding_a_vault_secret_is_never_written(
    settings: Settings, workspace: Path
) -> None:
    secret = "pa55-w0rd-Zq9-checkpoint"
    register([(secret, "DS_TEST__PASSWORD")])
    pad = LocalRuntime(
        "vaulted",
        root=settings.home / "pads" / "vaulted",
        cwd=workspace,
        settings=settings,
        secret_env=lambda: {"DS_TEST__PASSWORD": secret},
    )
    try:
        await pad.start()
        cell = await pad.execute(
            "import os\nconn = {'password': os.environ['DS_TEST__PASSWORD']}\nplain = 'x'"
        )
        assert "conn: not saved (holds a secret: the value of $DS_TEST__PASSWORD)" in cell.logs
        await saved(pad, cell.number)
        for path in ckdir(pad).rglob("*"):
            assert not path.is_file() or secret.encode() not in path.read_bytes(), path
    finally:
        await pad.close()


async def test_rescrub_drops_blobs_holding_a_secret_learnt_later(
    manager: ScratchpadManager,
) -> None:
    secret = "late-secret-Zq9-4471-checkpoint"
    pad = await manager.get_or_create("late")
    assert isinstance(pad, LocalRuntime)
    cell = await pad.execute(f"token = {secret!r}\nplain = [1]")
    await saved(pad, cell.number)
    assert scrubber().add(secret, "LATE_TOKEN")
    await manager.rescrub()
    for path in ckdir(pad).rglob("*"):
        assert not path.is_file() or secret.encode() not in path.read_bytes(), path
    await kill(pad)
    after = await pad.execute("plain, 'token' in dir()")
    assert after.result == "([1], False)"
    assert "token (its saved value is gone (it held a secret, or was deleted)" in after.logs


SERVER_SECRET = "srv-only-Zq9-4471-ckpt-pw"  # registered with the server, never told the pad
KEY_SHAPED = "ghp_" + "R2d2C3p0BB8bb8Xw1ngY0daK3r3k4lM6nP8qR0"  # nobody registered it


def holding(pad: LocalRuntime, *values: str) -> list[Path]:
    """The files of the pad's checkpoint that hold any of ``values``."""
    found = []
    for path in ckdir(pad).rglob("*"):
        if path.is_file() and any(value.encode() in path.read_bytes() for value in values):
            found.append(path)
    return found


async def test_secrets_the_scrubber_knows_are_never_kept_in_a_checkpoint(
    pad: LocalRuntime,
) -> None:
    register([(SERVER_SECRET, "DS_SRV__PASSWORD")])
    first = await pad.execute(
        f"password = {SERVER_SECRET!r}\nconn = {{'pw': password, 'port': 5432}}\n"
        f"token = {KEY_SHAPED!r}\nplain = [1, 2]\nx = 5\n"
    )
    assert first.status == "ok", first.error
    assert (
        "token: not saved (holds what looks like a secret (a key of the shape gh…))" in first.logs
    )
    await saved(pad, first.number)
    deadline = asyncio.get_running_loop().time() + DEADLINE_S
    while holding(pad, SERVER_SECRET):  # scanned once on disk, after the cell's answer
        assert asyncio.get_running_loop().time() < deadline, "the blobs were not scanned"
        await asyncio.sleep(0.01)
    second = await pad.execute("plain")
    assert "password: not kept (it held a secret)" in second.logs
    assert "conn: not kept (it held a secret)" in second.logs
    assert "plain: not kept" not in second.logs and "x: not kept" not in second.logs
    assert holding(pad, SERVER_SECRET, KEY_SHAPED) == []
    await kill(pad)
    after = await pad.execute("plain, x, [n in dir() for n in ('password', 'conn', 'token')]")
    assert after.result == "([1, 2], 5, [False, False, False])"
    gone = "(its saved value is gone (it held a secret, or was deleted); defined in cell 1"
    assert f"password {gone}" in after.logs and f"conn {gone}" in after.logs
    assert "token (never saved: holds what looks like a secret (a key of the shape gh" in after.logs
    assert SERVER_SECRET not in after.logs and KEY_SHAPED not in after.logs


async def test_a_closed_pad_leaves_no_blob_holding_a_secret(pad: LocalRuntime) -> None:
    """A close waits for the scan of the last cell's blobs (a big one takes a while)."""
    register([(SERVER_SECRET, "DS_SRV__PASSWORD")])
    code = f"import os\nrows = [{SERVER_SECRET!r}, os.urandom(30 << 20)]\nplain = 1"
    cell = await pad.execute(code)
    assert cell.status == "ok", cell.error
    await saved(pad, cell.number)  # on disk; its scan (30 MB) still running
    partial = ckdir(pad) / "blobs" / f".{'0' * 64}.pkl.99999.tmp"  # a killed writer's
    partial.write_bytes(SERVER_SECRET.encode())
    await pad.close()
    assert holding(pad, SERVER_SECRET) == []
    assert (ckdir(pad) / "HEAD").read_text() == str(cell.number)  # the rest was kept


def test_the_kernel_finds_key_shapes_where_a_pickle_puts_them() -> None:
    """Each shape the scrubber knows, in strings whose pickled length is a letter or digit
    (no word goes on there), and none in ordinary text."""
    import pickle

    from scratchpad.runtime.inkernel import pickling as kernel_side
    from scratchpad.scrub.patterns import KEY_SHAPES
    from tests.scrub.corpus import CONTROL_LINES, UNKNOWN_KEYS

    shapes = kernel_side.key_shapes(KEY_SHAPES)
    assert shapes is not None
    for key in UNKNOWN_KEYS:
        for value in (key, key.encode(), [key], {"k": "token=" + key}, key + "x" * 300):
            assert kernel_side.key_shape_in(shapes, pickle.dumps(value, protocol=5)), value
    assert len("github_pat_11ABCDEFG0abcdefghijkl_mnopqrstuvwxyz0123456789ABCDEFGHIJ") == 68
    for line in CONTROL_LINES:
        assert kernel_side.key_shape_in(shapes, pickle.dumps(line, protocol=5)) is None, line
    assert kernel_side.key_shape_in(shapes, pickle.dumps("xAKIAIOSFODNN7EXAMPLE")) is None


def test_a_blob_is_searched_in_pieces_that_miss_no_secret(tmp_path: Path) -> None:
    """A secret across the cut between two pieces is found; a key's shape that only seems
    to start at a cut (the cut went through a word) is not."""
    register([(SERVER_SECRET, "DS_SRV__PASSWORD")])
    blob = tmp_path / "blob.pkl"
    filler = b"." * (checkpoint.SCAN_PIECE * 2)
    for value in (SERVER_SECRET, KEY_SHAPED):
        for shift in (-len(value) + 1, -5, 0):
            at = checkpoint.SCAN_PIECE + shift
            blob.write_bytes(filler[:at] + b" " + value.encode() + filler[at:])
            assert checkpoint.held_secret(blob, scrubber()), (value, shift)
    at = checkpoint.SCAN_PIECE - 3
    blob.write_bytes(filler[:at] + b"abc" + KEY_SHAPED.encode() + filler[at:])
    assert not checkpoint.held_secret(blob, scrubber())
