"""Hermetic test setup: every test gets its own home, no SCRATCHPAD_* or provider keys."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import zipfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from scratchpad.config import Settings
from scratchpad.runtime.base import ScratchpadRuntime
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.scrub import scrubber
from tests.ray import cluster  # noqa: F401 - Ray's settings, before any test module imports Ray

PROVIDER_KEYS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL")


@pytest.fixture(autouse=True)
def hermetic_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in list(os.environ):
        if name.startswith("SCRATCHPAD_") or name in PROVIDER_KEYS:
            monkeypatch.delenv(name)
    home = tmp_path / "home"
    monkeypatch.setenv("SCRATCHPAD_HOME", str(home))
    monkeypatch.setenv("UV_OFFLINE", "1")  # installs in tests use local wheels only
    return home


@pytest.fixture(autouse=True)
def fresh_scrubber() -> Iterator[None]:
    """The process-wide scrubber forgets the secrets a test registered."""
    yield
    scrubber().reset()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings with short timeouts, so timeout paths run in a fraction of a second."""
    return Settings(
        home=tmp_path / "home",
        interrupt_grace_s=1.0,
        kernel_start_timeout_s=20.0,
    )


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path


@pytest.fixture
def scratch(workspace: Path) -> Path:
    """A directory cells may write and tests read: inside the workspace, made before any pad
    starts (the sandbox keeps pads out of the rest of tmp_path; see README, Trust model)."""
    path = workspace / "scratch"
    path.mkdir()
    return path


@pytest.fixture
async def manager(workspace: Path, settings: Settings) -> AsyncIterator[ScratchpadManager]:
    mgr = ScratchpadManager(workspace=workspace, settings=settings)
    yield mgr
    await mgr.close_all()


@pytest.fixture(params=["local"])
def runtime_kind(request: pytest.FixtureRequest) -> str:
    """The backends the contract suite runs against (the remote backend joins later)."""
    return str(request.param)


@pytest.fixture
async def pad(manager: ScratchpadManager, runtime_kind: str) -> ScratchpadRuntime:
    assert runtime_kind == "local"
    return await manager.get_or_create("main")


async def wait_until_busy(*pads: ScratchpadRuntime) -> None:
    """Poll until every pad runs a cell (busy is a plain property, there is no event)."""
    while not all(pad.busy for pad in pads):  # noqa: ASYNC110
        await asyncio.sleep(0.01)


def build_wheel(
    directory: Path, name: str, version: str = "1.0", body: str = "", module: str = ""
) -> Path:
    """A minimal pure-Python wheel, so install tests never need the network (its package is
    ``module``, else ``name``)."""
    dist = f"{name}-{version}.dist-info"
    wheel = directory / f"{name}-{version}-py3-none-any.whl"
    files = {
        f"{module or name}/__init__.py": body or f"VERSION = {version!r}\n",
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = "".join(f"{path},,\n" for path in files) + f"{dist}/RECORD,,\n"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
        archive.writestr(f"{dist}/RECORD", record)
    return wheel


@pytest.fixture
def readable_dir() -> Iterator[Path]:
    """A directory every user may read (pads of a root server run as another user, and
    pytest's own temporary directories are the root user's alone)."""
    path = Path(tempfile.mkdtemp(prefix="scratchpad-test-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def wheel(readable_dir: Path) -> Path:
    return build_wheel(readable_dir, "sp_demo_pkg")
