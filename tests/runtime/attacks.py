"""What a hostile cell does to get out of its pad, as scenarios a test runs as root and as an
unprivileged user (see tests/unprivileged.py). Each returns what it got out: an empty answer
means the pad held."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from scratchpad.config import Settings
from scratchpad.runtime.manager import ScratchpadManager

DEADLINE_S = 15.0


def processes_with(token: str) -> list[int]:
    """The pids of every process of this machine whose command line holds ``token``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as file:
                command = file.read()
        except OSError:
            continue
        if token.encode() in command and not _is_zombie(entry):
            found.append(int(entry))
    return found


def _is_zombie(pid: str) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as file:
            return file.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


async def gone(token: str, deadline_s: float = DEADLINE_S) -> list[int]:
    """Wait until no process carries ``token``; the pids still there at the deadline."""
    end = time.monotonic() + deadline_s
    while (left := processes_with(token)) and time.monotonic() < end:  # noqa: ASYNC110
        await asyncio.sleep(0.05)
    return left


async def interpreter_swap(home: Path, workspace: Path, rounds: int) -> list[str]:
    """Item 1: while something swaps the pad's ``bin/python`` between the real interpreter
    and a payload (as fast as it can, the whole time), the pad restarts ``rounds`` times (a
    reset, a killed kernel, an install). The payload copies the API key into a file outside
    the pad when it runs outside the sandbox: what it copied is returned."""
    marker = home.parent / "outside-marker"
    (home).mkdir(parents=True, exist_ok=True)
    (home / "api_key").write_text("sk-the-servers-key-0123456789")
    manager = ScratchpadManager(workspace=workspace, settings=Settings(home=home))
    pad = await manager.get_or_create("main")
    target = _venv_python(manager)
    real = os.path.realpath(target)
    forged = target.parent / "forged"
    forged.write_text(
        f"#!/bin/sh\ncat {home / 'api_key'} > {marker} 2>/dev/null; touch {marker}\n"
        f'exec {real} "$@"\n'
    )
    forged.chmod(0o755)
    stop = False

    def swap() -> None:
        staged = target.parent / ".staged"
        while not stop:
            for source in (str(forged), real):
                try:
                    os.symlink(source, staged)
                    os.replace(staged, target)
                except OSError:
                    continue

    swapper = asyncio.get_running_loop().run_in_executor(None, swap)
    try:
        for round_ in range(rounds):
            if round_ % 10 == 9:
                await pad.execute("import os\nos._exit(1)")  # a kernel that dies, restarted
            else:
                await pad.reset()
            await pad.execute("1 + 1")
    finally:
        stop = True
        await swapper
        os.replace(target, target.parent / ".replaced")
        os.symlink(real, target)
        await manager.close_all()
    return [marker.read_text()] if marker.exists() else []


def _venv_python(manager: ScratchpadManager) -> Path:
    from scratchpad.runtime.manager import pad_root

    return pad_root(manager.settings, "main") / "bin" / "python"


STRAY = (
    "import subprocess\n"
    "subprocess.run(['setsid', 'sh', '-c', 'env -i sleep {token} &'], check=True)\n"
    "subprocess.run(['sh', '-c', 'nohup sleep {token} >/dev/null 2>&1 &'], check=True)\n"
)


async def strays_after(home: Path, workspace: Path, how: str) -> list[int]:
    """Item 5: a cell starts processes that leave its group and environment (``setsid``,
    ``env -i``, ``nohup``), then its pad ends ``how`` ("exit": the kernel exits on its own;
    "reset"; "remove"). The processes left running are returned."""
    token = f"600{os.getpid()}.{len(how)}1"
    manager = ScratchpadManager(workspace=workspace, settings=Settings(home=home))
    try:
        pad = await manager.get_or_create("main")
        started = await pad.execute(STRAY.format(token=token))
        assert started.status == "ok", started.error
        assert processes_with(token), "the cell's processes did not start"
        if how == "exit":
            await pad.execute("import os\nos._exit(0)")
        elif how == "reset":
            await pad.reset()
        elif how == "remove":
            await manager.remove("main")
        return await gone(token)
    finally:
        await manager.close_all()
        for pid in processes_with(token):  # never leave them behind, whatever the verdict
            os.kill(pid, 9)


async def terminals_and_devices(home: Path, workspace: Path, terminal: str) -> dict[str, str]:
    """Item 4: what a cell can open of the devices: ``terminal`` (a pseudo-terminal of the
    user), the machine's disks, and what it sees in /dev. Answers {what: how it went}."""
    disks = sorted(
        f"/dev/{name}"
        for name in os.listdir("/dev")
        if (name.startswith(("vd", "sd", "nvme", "xvd", "loop", "mmcblk")) and name[-1].isdigit())
        or name in ("vda", "sda", "nvme0n1", "xvda")
    )
    code = (
        "import os, json\n"
        "seen = {}\n"
        f"for path in {[terminal, *disks, '/dev/tty', '/dev/console', '/dev/kmsg']!r}:\n"
        "    try:\n"
        "        os.close(os.open(path, os.O_RDONLY | os.O_NOCTTY))\n"
        "        seen[path] = 'opened'\n"
        "    except OSError as exc:\n"
        "        seen[path] = exc.__class__.__name__\n"
        "seen['/dev'] = ' '.join(sorted(os.listdir('/dev'))) if os.path.isdir('/dev') else ''\n"
        "print(json.dumps(seen))"
    )
    manager = ScratchpadManager(workspace=workspace, settings=Settings(home=home))
    try:
        pad = await manager.get_or_create("main")
        cell = await pad.execute(code)
        assert cell.status == "ok", cell.error
        import json

        return dict(json.loads(cell.stdout))
    finally:
        await manager.close_all()


FORK_BOMB = (
    "import os, time\nchildren = 0\ntry:\n"
    "    for _ in range(400):\n"
    "        if os.fork() == 0:\n            time.sleep(30)\n            os._exit(0)\n"
    "        children += 1\n"
    "except OSError as exc:\n    print('refused after', children, type(exc).__name__)\n"
    "children"
)


async def fork_bomb(home: Path, workspace: Path, processes: int) -> dict[str, str]:
    """Item 7: a cell forks as fast as it can under a limit of ``processes``; what it got,
    and whether a new pad still starts beside it."""
    manager = ScratchpadManager(workspace=workspace, settings=Settings(home=home))
    try:
        pad = await manager.get_or_create("bomb", limits={"processes": processes})
        cell = await pad.execute(FORK_BOMB)
        other = await manager.get_or_create("other")
        beside = await other.execute("1 + 1")
        return {
            "status": cell.status,
            "stdout": cell.stdout,
            "children": cell.result or "",
            "beside": beside.result or "",
        }
    finally:
        await manager.close_all()
