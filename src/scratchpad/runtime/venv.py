"""A pad's virtualenv: create, recognise for reuse, rebuild, install into, restore.

Layout of a pad directory (which *is* the venv)::

    <pad>/bin/python ...          the venv (uv venv --system-site-packages, no seed)
    <pad>/requirements.txt        what was installed; replayed when the venv is rebuilt
    <pad>/scratchpad-venv.json    written once a kernel started from it (the verification)
    <pad>/pad.json                the pad's name (the directory may be a slug, see names.py)
    <pad>/history.jsonl           the pad's cells (see history.py)

The venv also sees the packages of the environment Scratchpad itself runs in (a ``.pth`` file
adds them after the pad's own), so what the host has installed is importable in every pad.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import re
import shutil
import site
import stat
import sys
from pathlib import Path

from scratchpad.errors import InstallError, InvalidInputError, VenvError
from scratchpad.fsutil import atomic_write_bytes, atomic_write_text, private_dir
from scratchpad.runtime import procgroup
from scratchpad.scrub import scrub
from scratchpad.text import find_control

MARKER = "scratchpad-venv.json"
NAME_FILE = "pad.json"
REQUIREMENTS = "requirements.txt"
HOST_PTH = "_scratchpad_host.pth"
KEEP_ON_REBUILD = ("requirements.txt", "history.jsonl", NAME_FILE)
PLAIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
CREATE_TIMEOUT_S = 60.0
OUTPUT_CAP = 64 * 1024  # characters of an installer's output kept (head and tail)
SANDBOX_SCRIPT = str(Path(__file__).parent / "inkernel" / "sandbox.py")
Confine = tuple[int | None, dict[str, str]] | None  # (ruleset fd, environment) of a pad


def venv_python(root: Path) -> Path:
    return root / "bin" / "python"


def host_python_version() -> str:
    return platform.python_version()


def is_reusable(root: Path) -> bool:
    """True when a kernel already started from this venv with the host's Python version, and
    its ``bin/python`` is still the host's interpreter: the pad may write in ``bin/``, and the
    server runs that file unsandboxed to start the next kernel."""
    try:
        marker = json.loads((root / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (
        isinstance(marker, dict)
        and marker.get("python_version") == host_python_version()
        and os.path.realpath(venv_python(root)) == os.path.realpath(sys.executable)
    )


def mark_verified(root: Path) -> None:
    record = {"python_version": host_python_version(), "base_python": sys.executable}
    atomic_write_text(root / MARKER, json.dumps(record, indent=2) + "\n")


def record_name(root: Path, name: str) -> None:
    """Keep the pad's real name beside its venv (listing directories gives it back)."""
    if read_name(root) != name:
        atomic_write_text(root / NAME_FILE, json.dumps({"name": name}) + "\n")


def read_name(root: Path) -> str | None:
    """The name recorded by :func:`record_name`, or None."""
    try:
        data = json.loads((root / NAME_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    name = data.get("name") if isinstance(data, dict) else None
    return name if isinstance(name, str) else None


PAD_FILES = ("pyvenv.cfg", MARKER, NAME_FILE, REQUIREMENTS, "history.jsonl")


async def remove(root: Path) -> None:
    """Delete a pad's directory, refusing anything that does not look like one: a bug that
    pointed ``root`` elsewhere must never delete a directory that is not ours."""
    if not root.exists() and not root.is_symlink():
        return
    if root.is_symlink() or not root.is_dir():
        raise VenvError(f"refusing to delete {root}: it is not a pad's directory")
    if any(root.iterdir()) and not any((root / name).exists() for name in PAD_FILES):
        raise VenvError(
            f"refusing to delete {root}: it holds none of a pad's files ({', '.join(PAD_FILES)})"
        )
    await asyncio.to_thread(shutil.rmtree, root, True)


async def create(root: Path) -> None:
    """(Re)create the venv at ``root``, keeping its requirements and history files."""
    kept = {name: _kept(root / name) for name in KEEP_ON_REBUILD if (root / name).exists()}
    await remove(root)
    private_dir(root.parent)
    error = await _create_with_uv(root)
    if error is not None:
        await remove(root)
        await asyncio.to_thread(_create_with_stdlib, root)
    for name, (data, mode) in kept.items():
        atomic_write_bytes(root / name, data, mode=mode)  # history.jsonl stays 0600
    _link_host_packages(root)


def _kept(path: Path) -> tuple[bytes, int]:
    """A file's bytes and permission bits, to put it back after a rebuild."""
    return path.read_bytes(), stat.S_IMODE(path.stat().st_mode)


async def _create_with_uv(root: Path) -> str | None:
    """Create with uv; the error text when uv is missing or fails (the caller falls back)."""
    try:
        from uv import find_uv_bin

        uv = find_uv_bin()
    except (ImportError, FileNotFoundError) as exc:
        return f"uv unavailable: {exc}"
    argv = [
        uv,
        "venv",
        "--system-site-packages",
        "--no-project",
        "--no-config",
        "--quiet",
        "--python",
        sys.executable,
        str(root),
    ]
    code, output = await run_tool(argv, CREATE_TIMEOUT_S)
    return None if code == 0 else f"uv venv failed ({code}): {output}"


def _create_with_stdlib(root: Path) -> None:
    import venv

    try:
        venv.EnvBuilder(system_site_packages=True, with_pip=False, symlinks=True).create(root)
    except Exception as exc:
        raise VenvError(
            f"could not create a virtualenv at {root} with uv or the venv module: {exc}. "
            "Check free disk space and permissions of that directory."
        ) from exc


def _link_host_packages(root: Path) -> None:
    """Let the pad import what the host environment has (after its own packages)."""
    if sys.prefix == sys.base_prefix:
        return  # the host is the system interpreter: --system-site-packages already covers it
    lines = [
        f"import site; site.addsitedir({path!r})"
        for path in site.getsitepackages()
        if os.path.isdir(path)
    ]
    for target in (root / "lib").glob("python*/site-packages"):
        (target / HOST_PTH).write_text("\n".join(lines) + "\n", encoding="utf-8")


# -- packages -------------------------------------------------------------------------------
def validate_specs(packages: object) -> list[str]:
    """Package specs as the installer will get them; refuses options and odd characters."""
    if isinstance(packages, str) or not isinstance(packages, (list, tuple)):
        raise InvalidInputError("packages must be a list of strings, e.g. ['requests', 'six']")
    specs: list[str] = []
    for spec in packages:
        if not isinstance(spec, str) or not spec.strip():
            raise InvalidInputError(f"package spec {spec!r} is empty or not a string")
        spec = spec.strip()
        if find_control(spec) is not None:
            raise InvalidInputError(
                f"package spec {spec!r} contains a control character; give a plain name, "
                "version, URL or path"
            )
        if spec.startswith("-") or any(ch.isspace() for ch in spec) or len(spec) > 500:
            raise InvalidInputError(
                f"package spec {spec!r} is not allowed: give a name with an optional version "
                "('pandas>=2'), a URL or a path, without options or spaces"
            )
        specs.append(spec)
    if not specs:
        raise InvalidInputError("no packages given: pass at least one package name")
    return specs


def plain_names(specs: list[str]) -> list[str]:
    """The specs that are bare distribution names (the only ones we can check locally)."""
    return [spec for spec in specs if PLAIN_NAME.match(spec)]


def read_requirements(root: Path) -> list[str]:
    try:
        text = (root / REQUIREMENTS).read_text(encoding="utf-8")
    except OSError:
        return []
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def record_requirements(root: Path, specs: list[str]) -> None:
    current = read_requirements(root)
    merged = current + [spec for spec in specs if spec not in current]
    if merged != current:
        atomic_write_text(root / REQUIREMENTS, "\n".join(merged) + "\n")


async def install(root: Path, specs: list[str], timeout: float, confine: Confine = None) -> str:
    """``uv pip install`` into the venv; the installer's output, or InstallError."""
    from uv import find_uv_bin

    argv = [find_uv_bin(), "pip", "install", "--python", str(venv_python(root)), *specs]
    code, output = await run_tool(argv, timeout, confine)
    if code is None:
        raise InstallError(
            f"installing {', '.join(specs)} timed out after {timeout:g}s; "
            f"retry, or raise SCRATCHPAD_INSTALL_TIMEOUT_S. Installer output:\n{output}",
            output=output,
        )
    if code != 0:
        raise InstallError(
            f"installing {', '.join(specs)} failed (exit code {code}); check the names and "
            f"versions. Installer output:\n{output}",
            exit_code=code,
            output=output,
        )
    return output


async def restore(root: Path, timeout: float, confine: Confine = None) -> str:
    """Reinstall what requirements.txt records (after a rebuild); '' when nothing to do."""
    specs = read_requirements(root)
    return await install(root, specs, timeout, confine) if specs else ""


async def run_tool(
    argv: list[str], timeout: float, confine: Confine = None
) -> tuple[int | None, str]:
    """Run a helper program (uv); (exit code, or None when it timed out, and its output,
    kept also when it had to be stopped). With ``confine`` (a Landlock ruleset fd or None,
    and an environment) it runs sandboxed, as the pad: an installer runs the pad's own
    interpreter, and with it whatever ``.pth`` files the pad wrote."""
    ruleset, base = confine if confine is not None else (None, dict(os.environ))
    env = {**base, "UV_NO_PROGRESS": "1", "UV_PYTHON_DOWNLOADS": "never"}
    fds: tuple[int, ...] = ()
    if ruleset is not None:
        argv = [sys.executable, "-I", "-S", SANDBOX_SCRIPT, str(ruleset), *argv]
        fds = (ruleset,)
    try:
        result = await procgroup.run(
            argv, timeout=timeout, env=env, output_cap_chars=OUTPUT_CAP, pass_fds=fds
        )
    except OSError as exc:
        return 127, str(exc)
    code = None if result.timed_out else result.returncode
    return code, scrub(result.output.strip())  # an index URL may carry a token
