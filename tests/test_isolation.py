"""No process of ours imports what a pad (or anyone) planted where it starts or where a pad
works: modules are planted under every name the package imports, in the directory the CLI
starts its background server from and, by a cell, in the pad's own directory; then the
server is used the ways people use it (cells, installs, resets, dumps, notebook exports,
lists, files, MCP over stdio and HTTP, a restart). Each planted module writes a marker when
a process that carries ``PLANTED_MARKERS`` imports it; pad kernels never get that variable
(their environment is an allowlist), so a marker means a process outside a pad's sandbox
ran planted code."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

import scratchpad
from scratchpad.cli.background import stop
from scratchpad.config import Settings
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.server.auth import resolve_api_key
from scratchpad.server.state import running_record
from tests.server_helpers import free_port, wait_healthy

SRC = Path(scratchpad.__file__).parent
SCRATCHPAD = Path(sys.executable).with_name("scratchpad")  # the console script people run
PLANTED_BY_CELL = "planted by the cell\n"

# Plants a package under each of ``names`` in ``where``, each with a ``cli/__main__.py``
# (``python -m scratchpad.cli`` runs that one). Run by the test and, as a cell, by a pad.
PLANTER = """
import os
MODULE = '''import os, sys
_to = os.environ.get("PLANTED_MARKERS")
if _to:
    with open(os.path.join(_to, f"{__name__}.{os.getpid()}"), "w") as _marker:
        _marker.write(" ".join(sys.argv))
'''
for name in names:
    os.makedirs(os.path.join(where, name, "cli"), exist_ok=True)
    for part in ("__init__.py", "cli/__init__.py", "cli/__main__.py"):
        with open(os.path.join(where, name, part), "w") as handle:
            handle.write(MODULE)
"""


def imported_names(*, lazily: bool = False) -> set[str]:
    """Every top-level module name the package imports anywhere: at a module's top (run when
    that module is first imported, often lazily), inside a function, or by a function of ours
    that imports a module named by a string; computed from the source, so the list stays
    complete. ``lazily``: only those imported inside functions or by name."""
    names: set[str] = set()
    for path in SRC.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        functions = (
            n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
        )
        for node in (n for f in functions for n in ast.walk(f)) if lazily else ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(alias.name.partition(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.partition(".")[0])
            elif (
                isinstance(node, ast.Call)
                and "import" in getattr(node.func, "id", getattr(node.func, "attr", ""))
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):  # import_module("keyring"), import_sdk("anthropic"), __import__(...)
                names.add(node.args[0].value.partition(".")[0])
    return names


def not_stdlib(names: set[str]) -> set[str]:
    """What a pad's own kernel never imports by itself (a cell decides that)."""
    return {name for name in names if name not in sys.stdlib_module_names}


def plant(where: Path, names: set[str]) -> None:
    exec(PLANTER, {"names": sorted(names), "where": str(where)})


def planting_cell(names: set[str]) -> str:
    """A hostile cell: plants in its working directory, prints where that is."""
    return f"names = {sorted(names)!r}\nwhere = '.'\n{PLANTER}\nprint(os.getcwd())\n"


def fired(markers: Path) -> dict[str, str]:
    """Planted modules that ran, and the command line of the process that ran each."""
    return {path.name: path.read_text() for path in markers.iterdir()}


def test_the_names_planted_are_the_ones_the_server_imports_lazily() -> None:
    assert {"nbformat", "anthropic", "openai", "keyring", "uv", "venv"} <= imported_names(
        lazily=True
    )
    assert {"yaml", "mcp", "scratchpad", "json"} <= imported_names()


def test_nothing_planted_where_the_cli_starts_a_server_or_where_a_pad_works_is_imported(
    tmp_path: Path, hermetic_env: Path, wheel: Path
) -> None:
    names = imported_names()
    project, markers = tmp_path / "project", tmp_path / "markers"
    project.mkdir()
    markers.mkdir()
    plant(project, names)
    env = {**os.environ, "PLANTED_MARKERS": str(markers)}
    settings = Settings(home=hermetic_env)

    def scratchpad_cli(*args: str) -> subprocess.CompletedProcess[str]:
        command = [str(SCRATCHPAD), *args]
        return subprocess.run(
            command, cwd=project, env=env, capture_output=True, text=True, timeout=120
        )

    try:
        started = scratchpad_cli("exec", "p1", planting_cell(not_stdlib(names)))
        assert fired(markers) == {}
        assert started.returncode == 0, started.stderr
        record = running_record(settings)
        assert record is not None
        address = f"{record.host}:{record.port}"
        assert f"started a pad server for {hermetic_env} on {address}" in started.stderr
        assert os.readlink(f"/proc/{record.pid}/cwd") == str(hermetic_env)  # no pad writes it
        pad_dir = hermetic_env / "workspaces" / "p1"
        assert started.stdout.strip() == str(pad_dir.resolve())
        assert (pad_dir / "nbformat" / "__init__.py").is_file()  # the plant is in place

        for args in (
            ("exec", "p1", "x = 41"),
            ("exec", "p1", "x + 1"),
            ("exec", "p2", "open('mine.txt', 'w').write('p2')"),
            ("install", "p1", str(wheel)),
            ("exec", "p1", "import sp_demo_pkg\nsp_demo_pkg.VERSION"),
            ("view", "p1"),
            ("dump", "p1"),
            ("dump", "p1", "--ipynb", str(tmp_path / "p1.ipynb")),
            ("ls",),
            ("files", "ls", "p1"),
            ("reset", "p1"),
            ("exec", "p1", "'after the reset'"),
        ):
            done = scratchpad_cli(*args)
            assert fired(markers) == {}, args
            assert done.returncode == 0, (args, done.stderr)
        assert json.loads((tmp_path / "p1.ipynb").read_text())["nbformat"] == 4

        key = resolve_api_key(settings)
        headers = {"Authorization": f"Bearer {key}"}
        for path in ("/v1/pads/p1/notebook", "/v1/pads/p2/dump", "/v1/pads", "/v1/server"):
            answer = httpx.get(f"{record.url}{path}", headers=headers, timeout=60)
            assert answer.status_code == 200, (path, answer.text)
        asyncio.run(_use_mcp(record.url, key, project, env))
        assert fired(markers) == {}

        assert scratchpad_cli("server", "stop").returncode == 0
        again = scratchpad_cli("exec", "p1", "'a new server'")  # the next background start
        assert fired(markers) == {}
        assert again.returncode == 0, again.stderr
        assert "started a pad server" in again.stderr
    finally:
        stop(settings)
    assert fired(markers) == {}


async def _use_mcp(url: str, key: str, project: Path, env: dict[str, str]) -> None:
    stdio = StdioServerParameters(command=str(SCRATCHPAD), args=["mcp"], env=env, cwd=project)
    async with Client(stdio) as client:
        done = await client.call_tool("scratchpad", {"action": "exec", "name": "p1", "code": "7"})
        assert not done.is_error and "7" in _texts(done)
    headers = {"Authorization": f"Bearer {key}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client,
    ):
        done = await client.call_tool("scratchpad", {"action": "dump", "name": "p1"})
        assert not done.is_error, _texts(done)


def _texts(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def test_a_server_started_by_hand_in_a_project_imports_nothing_from_it(
    tmp_path: Path, hermetic_env: Path
) -> None:
    """``python -m scratchpad.cli serve`` typed in a directory puts it first on sys.path; the
    CLI drops it before anything is imported lazily (a notebook export imports nbformat)."""
    project, markers = tmp_path / "project", tmp_path / "markers"
    project.mkdir()
    markers.mkdir()
    plant(project, not_stdlib(imported_names(lazily=True)) - {"scratchpad"})
    port, key = free_port(), "by-hand-key"
    env = {**os.environ, "PLANTED_MARKERS": str(markers), "SCRATCHPAD_API_KEY": key}
    command = [sys.executable, "-m", "scratchpad.cli", "serve", "--port", str(port)]
    process = subprocess.Popen(command, cwd=project, env=env, stdout=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    answers: dict[str, httpx.Response] = {}
    try:
        with contextlib.suppress(RuntimeError):  # it did not come up: the markers say why
            wait_healthy(url, process)
            headers = {"Authorization": f"Bearer {key}"}
            body = {"name": "p", "code": "1 + 1"}
            answers["cell"] = httpx.post(
                f"{url}/scratchpad/execute-stream", json=body, headers=headers, timeout=60
            )
            answers["notebook"] = httpx.get(
                f"{url}/v1/pads/p/notebook", headers=headers, timeout=60
            )
    finally:
        process.terminate()
        process.wait(timeout=60)
    assert fired(markers) == {}
    frames = [
        json.loads(line[6:]) for line in answers["cell"].text.splitlines() if line[:6] == "data: "
    ]
    assert frames[-1]["type"] == "cell" and frames[-1]["cell"]["result"] == "2", frames
    assert answers["notebook"].status_code == 200, answers["notebook"].text


async def test_uv_reads_no_configuration_where_the_server_runs(
    tmp_path: Path,
    settings: Settings,
    workspace: Path,
    wheel: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """uv reads uv.toml and pyproject.toml in its working directory and every parent; a
    server's directory may be a pad's, so uv runs where no pad writes."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "uv.toml").write_text("this is [not toml\n")
    (project / "pyproject.toml").write_text("[tool.uv\n")
    monkeypatch.chdir(project)
    async with ScratchpadManager(workspace=workspace, settings=settings) as manager:
        pad = await manager.get_or_create("p")
        installed = await pad.install_packages([str(wheel)])
        assert "sp_demo_pkg" in installed, installed
        assert (await pad.execute("import sp_demo_pkg\nsp_demo_pkg.VERSION")).result == "'1.0'"
