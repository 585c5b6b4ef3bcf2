"""Run a piece of the test suite as an unprivileged user (``nobody``), the way a server started
by an ordinary user runs: ``setpriv`` to uid 65534 with no groups or capabilities.

The checkout and its ``.venv`` may lie in directories only root may enter (a CI clone in a
``mktemp -d`` directory, an interpreter under /root), so the script runs in a mount namespace
of its own where the checkout is bound at a directory everyone may pass through, and with the
system's Python 3 (same minor version as the suite's) importing the checkout's ``src`` and
the ``.venv``'s packages.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

NOBODY = 65534
CHECKOUT = Path(__file__).resolve().parent.parent
SYSTEM_PYTHON = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")


def skip_unless_possible() -> None:
    if os.geteuid() != 0:
        pytest.skip("running a part as another user needs root")
    for tool in ("setpriv", "unshare", "mount"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is missing")
    if not SYSTEM_PYTHON.exists():
        pytest.skip(f"{SYSTEM_PYTHON} is missing (the suite's Python, reachable by any user)")


def run_as_nobody(code: str, *, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """Run ``code`` (a Python script) as uid/gid 65534 with the checkout importable; its
    working directory and ``HOME`` are a fresh directory of that user's. Output as text."""
    skip_unless_possible()
    place = Path(tempfile.mkdtemp(prefix="scratchpad-nobody-"))
    place.chmod(0o755)
    try:
        work = place / "work"
        work.mkdir()
        os.chown(work, NOBODY, NOBODY)
        bound = place / "checkout"
        bound.mkdir()
        site = next((CHECKOUT / ".venv" / "lib").glob("python3*/site-packages"))
        script = work / "script.py"
        prelude = (
            "import sys\n"
            f"sys.path[:0] = [{str(bound)!r}, {str(bound / 'src')!r}, "
            f"{str(bound / site.relative_to(CHECKOUT))!r}]\n"
        )
        script.write_text(prelude + textwrap.dedent(code))
        inner = (
            f"mount --bind {CHECKOUT} {bound} && exec setpriv --reuid {NOBODY} "
            f"--regid {NOBODY} --clear-groups --inh-caps=-all "
            f"{SYSTEM_PYTHON} -X utf8 {script}"
        )
        env = {
            "PATH": f"{bound / '.venv' / 'bin'}:{os.defpath}",
            "HOME": str(work),
            "SCRATCHPAD_HOME": str(work / "home"),
            "UV_OFFLINE": "1",
            "LANG": "C.UTF-8",
        }
        return subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c", inner],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    finally:  # never recursive over the bound checkout: it is empty unless still bound
        shutil.rmtree(place / "work", ignore_errors=True)
        for directory in (place / "checkout", place):
            with contextlib.suppress(OSError):
                directory.rmdir()


def unprivileged(scenario: str, *args: object) -> object:
    """Run ``tests.runtime.attacks.<scenario>(home, workspace, *args)`` as nobody (home and
    workspace of that user's); its answer, which must be JSON."""
    done = run_as_nobody(
        f"""
        import asyncio, json, os
        from pathlib import Path
        from tests.runtime import attacks
        os.mkdir("ws")
        answer = asyncio.run(attacks.{scenario}(Path.cwd() / "home", Path.cwd() / "ws", *{args!r}))
        print("ANSWER", json.dumps(answer))
        """,
        timeout=300,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("ANSWER ")]
    assert lines, done.stdout + done.stderr
    return json.loads(lines[-1].removeprefix("ANSWER "))
