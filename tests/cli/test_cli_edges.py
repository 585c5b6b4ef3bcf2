"""What the CLI says is what happened, as real subprocesses against a real pad server: a
failure exits non-zero, the server it uses is named, a stopped cell's advice names the
CLI's own flags, IPython lines get a hint, ``install -r``, ``exec --save-images``, and
``ls`` shows memory and last activity."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import socket
import struct
import zlib
from pathlib import Path

import pytest

from scratchpad.cli.background import stop
from scratchpad.config import Settings
from scratchpad.server.state import DEFAULT_PORT, read_record
from tests.cli.test_cli_server import scratchpad
from tests.server_helpers import running_server


def tiny_png() -> bytes:
    """A valid 1x1 PNG (no text chunks, so the pad keeps it byte for byte)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


SVG = '<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"><rect width="4"/></svg>'


def test_a_failed_install_prints_why_and_exits_non_zero() -> None:
    done = scratchpad("install", "main", "nosuchpkg-sp-test")
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "installing nosuchpkg-sp-test failed (exit code" in done.stderr
    assert done.stdout == ""


def test_a_spec_no_pad_takes_is_refused_before_any_server_is_asked() -> None:
    done = scratchpad("install", "main", "--", "--index-url=https://example.invalid")
    assert done.returncode == 2 and "is not allowed" in done.stderr
    assert "started a pad server" not in done.stderr


def test_install_reads_requirements_files(wheel: Path, tmp_path: Path) -> None:
    (tmp_path / "more.txt").write_text(f"{wheel}  # the local wheel\n")
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("# what the pad needs\n\n-r more.txt\n")
    done = scratchpad("install", "main", "-r", str(requirements))
    assert done.returncode == 0, done.stderr
    imported = scratchpad("exec", "main", "import sp_demo_pkg\nsp_demo_pkg.VERSION")
    assert "Out: '1.0'" in imported.stdout

    requirements.write_text("sp_demo_pkg\n--index-url https://example.invalid/simple\n")
    refused = scratchpad("install", "main", "-r", str(requirements))
    assert refused.returncode == 2
    assert f"{requirements}:2: --index-url is an installer option" in refused.stderr
    nothing = scratchpad("install", "main")
    assert nothing.returncode == 2 and "no packages given" in nothing.stderr


def test_login_open_without_a_browser_exits_non_zero() -> None:
    env = {**os.environ, "BROWSER": "false"}  # a browser command that fails
    env.pop("DISPLAY", None)
    env.pop("WAYLAND_DISPLAY", None)
    done = scratchpad("login", "--open", env=env)
    assert done.returncode == 1, done.stderr
    assert "/login?token=" in done.stdout  # the link is still printed, for the person to open
    assert "no browser could be started" in done.stderr


def test_a_stopped_cells_advice_names_the_cli_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCRATCHPAD_TIMEOUT_SLACK_S", "0.5")  # --estimate 0.5: a 1 s limit
    hard = scratchpad("exec", "p", "--timeout", "0.5", "import time\ntime.sleep(30)")
    assert hard.returncode == 1
    assert "That was its --timeout: pass a larger one" in hard.stderr
    estimated = scratchpad("exec", "p", "--estimate", "0.5", "import time\ntime.sleep(30)")
    assert estimated.returncode == 1
    assert "pass --timeout, or a realistic --estimate" in estimated.stderr
    for done in (hard, estimated):
        assert "timeout_s" not in done.stderr and "estimated_seconds" not in done.stderr
    as_json = json.loads(scratchpad("exec", "p", "--json", "--timeout", "0.5",
                                    "import time\ntime.sleep(30)").stdout)  # fmt: skip
    assert "That was its --timeout" in as_json["error"]


def test_ipython_lines_get_a_one_line_hint() -> None:
    pip = scratchpad("exec", "p", "import os\n!pip install requests")
    assert pip.returncode == 1
    assert "SyntaxError" in pip.stderr
    assert "`!pip` is IPython syntax, which a pad does not run: install packages" in pip.stderr
    magic = scratchpad("exec", "p", "x = 1\n%timeit x")
    assert "`%timeit` is IPython syntax" in magic.stderr
    shell = scratchpad("exec", "p", "!ls -la")
    assert "use subprocess.run(['ls', ...]" in shell.stderr
    plain = scratchpad("exec", "p", "def broken(:\n    pass")
    assert "SyntaxError" in plain.stderr and "IPython" not in plain.stderr


IMAGES_CELL = f"""
import base64
class Png:
    def _repr_png_(self):
        return base64.b64decode({base64.b64encode(tiny_png()).decode()!r})
class Svg:
    def _repr_svg_(self):
        return {SVG!r}
display(Png())
display('not an image')
display(Svg())
print('done')
"""


def test_exec_save_images_writes_the_cells_images(tmp_path: Path) -> None:
    target = tmp_path / "out" / "images"  # made when missing
    done = scratchpad("exec", "p", "--save-images", str(target), IMAGES_CELL)
    assert done.returncode == 0, done.stderr
    files = sorted(target.iterdir())
    assert [f.suffix for f in files] == [".png", ".svg"]
    assert files[0].read_bytes() == tiny_png()
    assert files[1].read_text() == SVG
    assert [f"wrote {f}" for f in files] == [
        line for line in done.stdout.splitlines() if line.startswith("wrote ")
    ]
    as_json = scratchpad("exec", "p", "--json", "--save-images", str(target), IMAGES_CELL)
    assert json.loads(as_json.stdout)["status"] == "ok"  # the paths go to stderr
    assert as_json.stderr.count("wrote ") == 2 and len(list(target.iterdir())) == 4

    a_file = tmp_path / "file.txt"
    a_file.write_text("")
    refused = scratchpad("exec", "p", "--save-images", str(a_file), "1")
    assert refused.returncode == 2 and "is not a directory" in refused.stderr


def test_ls_shows_memory_and_last_activity() -> None:
    assert scratchpad("exec", "p", "x = 1").returncode == 0
    name, status, cells, memory, active = scratchpad("ls").stdout.strip().split("\t")
    assert (name, status, cells) == ("p", "idle", "1 cells")
    assert memory.endswith(" MiB") and float(memory.removesuffix(" MiB")) > 1
    assert active.startswith("active ") and active.endswith(" s ago")
    (pad,) = json.loads(scratchpad("ls", "--json").stdout)
    assert pad["memory_bytes"] > 1024 * 1024 and pad["last_activity"] > 0


def test_server_status_names_a_bound_workspace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = tmp_path / "project"
    workspace.mkdir()
    home = workspace / ".scratchpad"
    with running_server(tmp_path / "unused", tmp_path, "k", workspace=workspace):
        monkeypatch.setenv("SCRATCHPAD_HOME", str(home))
        monkeypatch.setenv("SCRATCHPAD_API_KEY", "k")
        record = read_record_of(home)
        status = scratchpad("server", "status")
        assert status.returncode == 0, status.stderr
        assert f"for {home} on 127.0.0.1:{record}" in status.stdout
        assert f"pads work in {workspace}" in status.stdout
        done = scratchpad("exec", "p", "import os; print(os.getcwd())")
        assert done.stdout.splitlines()[0] == str(workspace)
        assert "started a pad server" not in done.stderr  # the running one was used


def read_record_of(home: Path) -> int:
    record = read_record(Settings(home=home))
    assert record is not None
    return record.port


def test_a_server_started_beside_another_says_so_and_why_its_port_differs(
    hermetic_env: Path,
) -> None:
    """Port 8765 held (as by `make run` of another home): the command starts this home's own
    server on another port, and says which home, where, and why, never silently."""
    holder = socket.socket()
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        with contextlib.suppress(OSError):  # held by someone else already: just as good
            holder.bind(("127.0.0.1", DEFAULT_PORT))
            holder.listen()
        done = scratchpad("exec", "p", "1")
        assert done.returncode == 0, done.stderr
        record = read_record(Settings(home=hermetic_env))
        assert record is not None and record.port != DEFAULT_PORT
        assert f"started a pad server for {hermetic_env} on 127.0.0.1:{record.port}" in done.stderr
        assert f"port {DEFAULT_PORT} is taken" in done.stderr
    finally:
        holder.close()


def test_a_second_home_is_told_whose_server_holds_the_default_port(tmp_path: Path) -> None:
    """The `make run` case: one home's server on 8765, a command with another home."""
    first = {**os.environ, "SCRATCHPAD_HOME": str(tmp_path / "first")}
    second = {**os.environ, "SCRATCHPAD_HOME": str(tmp_path / "second")}
    try:
        started = scratchpad("server", "start", env=first)
        assert started.returncode == 0, started.stderr
        held = read_record(Settings(home=tmp_path / "first"))
        assert held is not None
        if held.port != DEFAULT_PORT:
            pytest.skip(f"port {DEFAULT_PORT} is held by something else on this machine")
        done = scratchpad("exec", "p", "1", env=second)
        assert done.returncode == 0, done.stderr
        assert f"started a pad server for {tmp_path / 'second'} on 127.0.0.1:" in done.stderr
        assert f"port {DEFAULT_PORT} is taken by the pad server of another home" in done.stderr
    finally:
        stop(Settings(home=tmp_path / "first"))
        stop(Settings(home=tmp_path / "second"))
