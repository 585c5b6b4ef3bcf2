"""Sandboxed pads: real kernels under Landlock, real files; the allowlisted environment."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from scratchpad.config import Settings
from scratchpad.errors import SandboxError
from scratchpad.runtime import confinement, launcher
from scratchpad.runtime.base import PadLLM, ScratchpadRuntime
from scratchpad.runtime.history import unframe
from scratchpad.runtime.inkernel import sandbox
from scratchpad.runtime.local import LocalRuntime
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.server.app import create_app

landlock = pytest.mark.skipif(
    sandbox.landlock_abi() == 0, reason="this kernel has no Landlock (Linux >= 5.13, lsm=landlock)"
)


def denied(cell_code: str) -> str:
    """A cell that prints DENIED when ``cell_code`` raises PermissionError."""
    body = "\n".join(f"    {line}" for line in cell_code.splitlines())
    verdict = "except PermissionError:\n    print('DENIED')\nelse:\n    print('ALLOWED')"
    return f"try:\n{body}\n{verdict}"


@pytest.fixture
async def own_home(
    tmp_path: Path, workspace: Path, settings: Settings
) -> AsyncIterator[ScratchpadRuntime]:
    """A pad whose home lies outside its workspace (an unbound server)."""
    root = settings.home / "pads" / "solo"
    pad = LocalRuntime("solo", root=root, cwd=workspace, settings=settings)
    await pad.start()
    yield pad
    await pad.close()


def refusal(cell_code: str) -> str:
    """A cell that prints how ``cell_code`` was refused (an errno name), or ALLOWED."""
    body = "\n".join(f"    {line}" for line in cell_code.splitlines())
    verdict = (
        "except OSError as exc:\n    import errno\n    print(errno.errorcode[exc.errno])\n"
        "else:\n    print('ALLOWED')"
    )
    return f"try:\n{body}\n{verdict}"


@pytest.fixture
def without_namespaces(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pads with Landlock alone, as on a system without namespaces."""
    monkeypatch.setenv("SCRATCHPAD_NAMESPACES", "off")


def namespaces_work(settings: Settings) -> bool:
    return confinement.support(settings).namespaces


@pytest.fixture(params=[True, False], ids=["home hidden", "home refused"])
async def hiding_manager(
    request: pytest.FixtureRequest, settings: Settings, workspace: Path
) -> AsyncIterator[ScratchpadManager]:
    """A manager of a bound workspace (its home inside), with namespaces (the home hidden)
    or with Landlock alone (the home refused)."""
    if request.param and not namespaces_work(settings):
        pytest.skip("this system does not let a process mount in a namespace of its own")
    chosen = settings if request.param else settings.model_copy(update={"namespaces": "off"})
    manager = ScratchpadManager(workspace=workspace, settings=chosen)
    yield manager
    await manager.close_all()


@landlock
async def test_a_cell_cannot_reach_the_home_or_write_outside_the_workspace(
    hiding_manager: ScratchpadManager, tmp_path: Path
) -> None:
    """The home inside the workspace (a bound workspace) is hidden where the system allows a
    mount namespace (the pad finds it empty), else refused by Landlock (PermissionError)."""
    manager = hiding_manager
    hidden = confinement.support(manager.settings).namespaces
    home = manager.settings.home
    other = await manager.get_or_create("other")
    await other.execute("x = 1")
    pad = await manager.get_or_create("main")
    await pad.execute("y = 1")  # its own history exists
    (home / "api_key").write_text("sk-not-for-pads")
    (home / "vault").mkdir()
    (home / "vault" / "postgres.prod").write_text("encrypted")
    outside = tmp_path / "outside"
    outside.mkdir()
    expected = {"ENOENT", "EROFS"} if hidden else {"EACCES"}
    for code in (
        f"open({str(home / 'api_key')!r}).read()",
        f"open({str(home / 'vault' / 'postgres.prod')!r}).read()",
        f"open({str(home / 'pads' / 'other' / 'history.jsonl')!r}).read()",
        f"open({str(home / 'pads' / 'main' / 'history.jsonl')!r}, 'a').write('forged')",
        f"open({str(home / 'pads' / 'main' / 'pad.json')!r}, 'w').write('forged')",
    ):
        cell = await pad.execute(refusal(code))
        assert cell.stdout.strip() in expected, (code, cell.stdout, cell.error)
    escape = await pad.execute(refusal(f"open({str(outside / 'escaped.txt')!r}, 'w')"))
    assert escape.stdout.strip() in ("EACCES", "ENOENT"), escape.error  # refused, or not there
    child = await pad.execute(
        f"import subprocess\nsubprocess.run(['cat', {str(home / 'api_key')!r}], "
        "capture_output=True, text=True).returncode"
    )
    assert child.result not in (None, "0")
    assert not (outside / "escaped.txt").exists()
    history = (home / "pads" / "main" / "history.jsonl").read_bytes().splitlines()
    assert all(unframe(line)[0] for line in history)  # nothing appended by the cell


def unreachable(cell_code: str) -> str:
    """A cell that prints UNREACHABLE when ``cell_code`` is refused (PermissionError, a
    read-only file system) or finds nothing there (a hidden path)."""
    body = "\n".join(f"    {line}" for line in cell_code.splitlines())
    verdict = (
        "except (PermissionError, FileNotFoundError):\n    print('UNREACHABLE')\n"
        "except OSError as exc:\n    print('UNREACHABLE' if exc.errno == 30 else repr(exc))\n"
        "else:\n    print('REACHED')"
    )
    return f"try:\n{body}\n{verdict}"


@landlock
async def test_a_home_outside_the_workspace_is_out_of_reach(
    own_home: ScratchpadRuntime, settings: Settings
) -> None:
    home = settings.home
    (home / "api_key").write_text("sk-not-for-pads")
    (home / "vault").mkdir()
    (home / "vault" / "postgres+prod.fernet").write_text("encrypted")
    for code in (
        f"open({str(home / 'api_key')!r}).read()",
        f"open({str(home / 'vault' / 'postgres+prod.fernet')!r}).read()",
        f"open({str(home / 'new-file')!r}, 'w')",
    ):
        cell = await own_home.execute(unreachable(code))
        assert cell.stdout.strip() == "UNREACHABLE", (code, cell.error)


@landlock
async def test_workspace_and_temp_files_are_writable(own_home: ScratchpadRuntime) -> None:
    cell = await own_home.execute(
        "import os, tempfile\n"
        "open('made.txt', 'w').write('top')\n"
        "os.makedirs('sub/deeper')\n"
        "open('sub/deeper/x.txt', 'w').write('deep')\n"
        "with tempfile.NamedTemporaryFile() as handle:\n"
        "    handle.write(b'temp')\n"
        "tempfile.gettempdir() == os.environ['TMPDIR']"
    )
    assert cell.status == "ok", cell.error
    assert cell.result == "True"


@landlock
async def test_a_workspace_that_holds_the_home_takes_new_files_anywhere(
    settings: Settings, workspace: Path
) -> None:
    """A bound workspace keeps its home inside: hidden in the pad's own mount namespace, so
    the whole workspace is the pad's, top level included."""
    if not namespaces_work(settings):
        pytest.skip("this system does not let a process mount in a namespace of its own")
    manager = ScratchpadManager(workspace=workspace, settings=settings)
    try:
        pad = await manager.get_or_create("main")
        cell = await pad.execute(
            "import os\nopen('new.txt', 'w').write('top')\nos.mkdir('made')\n"
            "sorted(os.listdir('.scratchpad')), sorted(os.listdir('.scratchpad/pads/main'))"
        )
        assert cell.ok, cell.error
        assert cell.result is not None and cell.result.startswith("(['pads'], ['bin', ")
        assert "history.jsonl" not in cell.result and "pad.json" not in cell.result
        assert (workspace / "new.txt").read_text() == "top" and (workspace / "made").is_dir()
        home = manager.settings.home
        assert (home / "pads" / "main" / "history.jsonl").exists()  # there, only hidden
    finally:
        await manager.close_all()


@landlock
@pytest.mark.usefixtures("without_namespaces")
async def test_without_hiding_only_subdirectories_of_a_workspace_holding_the_home_take_new_files(
    settings: Settings, workspace: Path
) -> None:
    (workspace / "existing.txt").write_text("before")
    (workspace / "data").mkdir()
    manager = ScratchpadManager(workspace=workspace, settings=settings)
    try:
        pad = await manager.get_or_create("main")
        top = await pad.execute(denied("open('new.txt', 'w')"))
        assert top.stdout.strip() == "DENIED"
        cell = await pad.execute(
            "open('existing.txt', 'a').write(' after')\n"
            "open('data/new.txt', 'w').write('fine')\n"
            "open('existing.txt').read()"
        )
        assert cell.result == "'before after'", cell.error
    finally:
        await manager.close_all()


@landlock
async def test_pip_installs_a_local_wheel_from_a_cell(
    wheel: Path, own_home: ScratchpadRuntime
) -> None:
    cell = await own_home.execute(
        "import subprocess, sys\n"
        f"done = subprocess.run([sys.executable, '-m', 'pip', 'install', '--no-index', "
        f"'--no-deps', {str(wheel)!r}], capture_output=True, text=True)\n"
        "print(done.stdout[-400:], done.stderr[-2000:])\n"
        "import importlib; importlib.invalidate_caches()\n"
        "import sp_demo_pkg\nsp_demo_pkg.VERSION"
    )
    assert cell.result == "'1.0'", cell.stdout + (cell.error or "")


@landlock
async def test_the_installer_runs_sandboxed(
    wheel: Path, own_home: ScratchpadRuntime, settings: Settings, workspace: Path
) -> None:
    """uv runs the pad's interpreter, so a .pth file the pad planted runs in the installer."""
    (settings.home / "api_key").write_text("sk-not-for-pads")
    probe = workspace / "probe.txt"
    code = (
        f"import site, os\nprobe, key = {str(probe)!r}, {str(settings.home / 'api_key')!r}\n"
        "body = f'try:\\n    open({key!r}).read(); r = \"READ\"\\n'\n"
        "body += 'except OSError:\\n    r = \"DENIED\"\\n'"
        "\nbody += f'open({probe!r}, \"a\").write(r)\\n'\n"
        "open(os.path.join(site.getsitepackages()[0], 'zz_probe.pth'), 'w')"
        ".write('import os; exec(' + repr(body) + ')\\n')"
    )
    planted = await own_home.execute(code)
    assert planted.status == "ok", planted.error
    report = await own_home.install_packages([str(wheel)])
    assert "sp_demo_pkg" in report or "Installed" in report, report
    assert probe.exists(), "the installer never ran the pad's interpreter"
    text = probe.read_text()
    assert "DENIED" in text and "READ" not in text


@landlock
async def test_numpy_pandas_and_matplotlib_work(own_home: ScratchpadRuntime) -> None:
    cell = await own_home.execute(
        "import numpy as np, pandas as pd, matplotlib.pyplot as plt\n"
        "frame = pd.DataFrame({'x': np.arange(5)})\n"
        "plt.plot(frame['x'])\n"
        "plt.savefig('figure.png')\n"
        "plt.show()\n"
        "import os\nos.path.getsize('figure.png') > 0"
    )
    assert cell.status == "ok", cell.error
    assert cell.result == "True"
    assert any("image/png" in output.get("data", output) for output in cell.outputs)
    assert "Matplotlib" not in cell.stderr  # no cache-directory warning


async def test_the_environment_is_allowlisted(
    own_home_env: ScratchpadRuntime,
) -> None:
    pad = own_home_env
    names = await pad.execute("import os\nsorted(os.environ)")
    assert names.result is not None
    for secret in ("SCRATCHPAD_API_KEY", "SCRATCHPAD_MODEL", "ANTHROPIC_API_KEY", "LD_PRELOAD"):
        assert repr(secret) not in names.result
    assert "'LC_ALL'" in names.result and "'TMPDIR'" in names.result
    await pad.configure_llm(PadLLM(provider="anthropic", model="claude-test"))
    key = await pad.execute("import os\nos.environ.get('ANTHROPIC_API_KEY')")
    assert key.result == "'sk-ant-from-the-server'"


@pytest.fixture
async def own_home_env(
    monkeypatch: pytest.MonkeyPatch, settings: Settings, workspace: Path
) -> AsyncIterator[ScratchpadRuntime]:
    monkeypatch.setenv("SCRATCHPAD_API_KEY", "sk-server-key-123456")
    monkeypatch.setenv("SCRATCHPAD_MODEL", "anthropic:secret-model")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-the-server")
    monkeypatch.setenv("LD_PRELOAD", "")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    pad = LocalRuntime("env", root=settings.home / "pads" / "env", cwd=workspace, settings=settings)
    await pad.start()
    yield pad
    await pad.close()


async def test_require_refuses_to_start_without_landlock(
    monkeypatch: pytest.MonkeyPatch, settings: Settings, workspace: Path
) -> None:
    monkeypatch.setattr(sandbox, "landlock_abi", lambda: 0)  # the test seam: "no Landlock"
    monkeypatch.setattr(confinement, "_support", {})
    strict = settings.model_copy(update={"sandbox": "require"})
    manager = ScratchpadManager(workspace=workspace, settings=strict)
    try:
        with pytest.raises(SandboxError, match="SCRATCHPAD_SANDBOX=auto"):
            await manager.get_or_create("main")
    finally:
        await manager.close_all()


@landlock
async def test_require_starts_a_sandboxed_kernel(settings: Settings, workspace: Path) -> None:
    strict = settings.model_copy(update={"sandbox": "require"})
    pad = LocalRuntime("strict", root=strict.home / "pads" / "s", cwd=workspace, settings=strict)
    await pad.start()
    try:
        target = strict.home / "pads" / "s" / "pad.json"
        cell = await pad.execute(unreachable(f"open({str(target)!r})"))
        assert cell.stdout.strip() == "UNREACHABLE"
    finally:
        await pad.close()


async def test_off_lets_a_cell_read_the_home(settings: Settings, workspace: Path) -> None:
    off = settings.model_copy(update={"sandbox": "off"})
    (off.home).mkdir(parents=True)
    (off.home / "api_key").write_text("readable")
    pad = LocalRuntime("open", root=off.home / "pads" / "o", cwd=workspace, settings=off)
    await pad.start()
    try:
        cell = await pad.execute(f"open({str(off.home / 'api_key')!r}).read()")
        assert cell.result == "'readable'", cell.error
    finally:
        await pad.close()


@pytest.mark.parametrize(
    ("setting", "abi", "expected"),
    [("auto", 7, "landlock"), ("off", 7, "off"), ("auto", 0, "unavailable")],
)
async def test_the_server_reports_the_sandbox(
    monkeypatch: pytest.MonkeyPatch,
    settings: Settings,
    workspace: Path,
    setting: str,
    abi: int,
    expected: str,
) -> None:
    monkeypatch.setattr(sandbox, "landlock_abi", lambda: abi)
    monkeypatch.setattr(confinement, "_support", {})
    chosen = settings.model_copy(update={"sandbox": setting})
    manager = ScratchpadManager(workspace=workspace, settings=chosen)
    app = create_app(manager, api_key="k" * 32)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        answer = await http.get("/v1/server", headers={"Authorization": "Bearer " + "k" * 32})
    body = answer.json()
    assert body["sandbox"] == expected
    assert body.get("sandbox_abi") == (abi if expected == "landlock" else None)


def test_the_banner_warns_when_pads_are_unsandboxed(
    monkeypatch: pytest.MonkeyPatch, settings: Settings
) -> None:
    from scratchpad.server.serve import banner

    monkeypatch.setattr(sandbox, "landlock_abi", lambda: 0)
    monkeypatch.setattr(confinement, "_support", {})
    assert "sandbox: unavailable" in banner("127.0.0.1", 1, settings)
    off = settings.model_copy(update={"sandbox": "off"})
    assert "sandbox: off" in banner("127.0.0.1", 1, off)
    monkeypatch.setattr(sandbox, "landlock_abi", lambda: 7)
    monkeypatch.setattr(confinement, "_support", {})
    assert "sandbox" not in banner("127.0.0.1", 1, settings)


async def test_a_replaced_interpreter_is_never_started(own_home: ScratchpadRuntime) -> None:
    """The pad may write in its venv's bin/; the server must not run what it put there."""
    cell = await own_home.execute(
        "import os, sys\n"
        "fake = os.path.join(os.environ['VIRTUAL_ENV'], 'bin', 'python')\n"
        "os.unlink(fake)\n"
        "open(fake, 'w').write('#!/bin/sh\\necho forged > ' + os.getcwd() + '/forged.txt\\n')\n"
        "os.chmod(fake, 0o755)"
    )
    assert cell.status == "ok", cell.error
    await own_home.reset()
    after = await own_home.execute("import os\nos.path.exists('forged.txt')")
    assert after.result == "False"


@landlock
@pytest.mark.usefixtures("without_namespaces")
async def test_a_file_added_beside_the_home_after_the_start_says_to_reset(
    own_home: ScratchpadRuntime, tmp_path: Path
) -> None:
    """tmp_path holds the home, so the pad may list it but reaches only the entries it had at
    start: the refusal says so (not "read everything but the home"), and a reset helps."""
    late = tmp_path / "wheels"
    late.mkdir()
    (late / "pkg.txt").write_text("made after the kernel started")
    code = f"open({str(late / 'pkg.txt')!r}).read()"
    cell = await own_home.execute(code)
    assert cell.status == "error" and "PermissionError" in (cell.error or "")
    assert f"{tmp_path} holds the Scratchpad home" in (cell.error or "")
    assert "reset the pad" in (cell.error or "")
    await own_home.reset()
    assert (await own_home.execute(code)).result == "'made after the kernel started'"


@landlock
async def test_a_refusal_by_the_sandbox_says_where_the_pad_may_write(
    own_home: ScratchpadRuntime, tmp_path: Path
) -> None:
    cell = await own_home.execute("open('/etc/scratchpad-not-here.txt', 'w')")
    assert cell.status == "error"
    assert "PermissionError" in (cell.error or "")
    assert "this pad runs sandboxed" in (cell.error or "")
    outside = tmp_path / "not-the-workspace"
    outside.mkdir()
    hidden = await own_home.execute(f"open({str(outside / 'x.txt')!r}, 'w')")
    assert hidden.status == "error" and "this pad runs sandboxed" in (hidden.error or "")
    other = await own_home.execute("raise PermissionError('not from the sandbox?')")
    assert "runs sandboxed" in (other.error or "")  # any PermissionError: it may be the cause
    plain = await own_home.execute("1 / 0")
    assert "sandboxed" not in (plain.error or "")


PEEK_AT_THE_SERVER = """
import os
try:
    seen = open(f"/proc/{os.getppid()}/environ", "rb").read()
except PermissionError:
    seen = b""
status = open("/proc/self/status").read()
print("verdict:", "readable" if b"SCRATCHPAD_API_KEY" in seen else "hidden")
held = [line for line in status.splitlines() if line.startswith("Cap") and int(line[7:], 16)]
print("capabilities:", held or "none")
"""


@landlock
def test_a_cell_cannot_read_the_environment_of_its_server(tmp_path: Path) -> None:
    """/proc/<server>/environ holds the server's keys: a pad must not read it, not even when
    the server runs as root (a pad keeps no capability: CAP_SYS_ADMIN or CAP_PERFMON would
    let it read the environment of a process outside its Landlock domain)."""
    from tests.server_helpers import running_server

    key = "server-environ-key-0123456789"
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with running_server(tmp_path / "home", workspace, key) as (url, _process):
        answer = httpx.post(
            f"{url}/scratchpad/execute-stream",
            json={"name": "peek", "code": PEEK_AT_THE_SERVER},
            headers={"Authorization": f"Bearer {key}"},
            timeout=60,
        )
    assert "verdict: hidden" in answer.text, answer.text
    assert "capabilities: none" in answer.text, answer.text


@landlock
async def test_a_refused_path_that_cannot_be_resolved_still_gives_an_error(
    own_home: ScratchpadRuntime,
) -> None:
    """The note's lookup of a refused path must not take the kernel down with it."""
    cell = await own_home.execute("open('/proc/1/root/etc/hostname').read()")
    assert cell.status == "error" and "PermissionError" in (cell.error or ""), cell.error
    after = await own_home.execute("1 + 1")
    assert after.result == "2"


@landlock
@pytest.mark.parametrize("namespaces", ["auto", "off"])
async def test_a_home_among_thousands_of_entries_still_starts_pads_and_programs(
    tmp_path: Path, settings: Settings, namespaces: str, wheel: Path
) -> None:
    """The rules name every entry beside the home on the way to it (by descent): with
    thousands of them, a launcher's spec outgrows one argument (128 KiB), so it goes by
    descriptor: the kernel, the installer and a confined program all start."""
    crowded = tmp_path / "crowded"
    crowded.mkdir()
    for index in range(3000):  # ~200 KiB of names beside the home
        (crowded / f"{index:05d}-a-neighbour-of-the-scratchpad-home-with-a-long-name").mkdir()
    home, workspace = crowded / "home", tmp_path / "ws"
    workspace.mkdir()
    chosen = settings.with_home(home).model_copy(update={"namespaces": namespaces})
    pad = LocalRuntime("crowd", root=home / "pads" / "crowd", cwd=workspace, settings=chosen)
    await pad.start()
    try:
        assert (await pad.execute("6 * 7")).result == "42"
        await pad.install_packages([str(wheel)])  # the installer starts too
        assert (await pad.execute("import sp_demo_pkg")).status == "ok"
    finally:
        await pad.close()
    ran = await launcher.run_confined(
        chosen, ["/bin/echo", "confined"], workspace=workspace, timeout=60,
        output_cap_chars=1000,
    )  # fmt: skip
    assert ran.returncode == 0 and "confined" in ran.output
