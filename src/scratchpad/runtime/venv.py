"""A pad's virtualenv: create, recognise for reuse, rebuild, install into, restore.

Layout of a pad directory (which *is* the venv)::

    <pad>/bin/python ...          the venv (uv venv --system-site-packages, no seed)
    <pad>/requirements.txt        what was installed; replayed when the venv is rebuilt
    <pad>/scratchpad-venv.json    written once a kernel started from it (the verification)
    <pad>/pad.json                the pad's name (the directory may be a slug, see names.py)
    <pad>/history.jsonl           the pad's cells (see history.py)
    <pad>/state.json              its generation, sleep and last use (see padstate.py)

The venv also sees the packages of the environment Scratchpad itself runs in (a ``.pth`` file
adds them after the pad's own), so what the host has installed is importable in every pad.

A venv is built beside the pad (``pads/.<dir>.new-*``) and renamed into place, so a failed
build (a full disk) leaves the pad as it was; a directory half-made by an earlier version
(venv entries only) is still recognised as the pad's, so it can be rebuilt or removed.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import re
import secrets
import shutil
import site
import sys
from collections.abc import Callable
from pathlib import Path

from scratchpad.errors import InstallError, InvalidInputError, VenvError
from scratchpad.fsutil import (
    NO_SPACE,
    PRIVATE_FILE_MODE,
    atomic_write_text,
    disk_full,
    private_dir,
)
from scratchpad.runtime import procgroup
from scratchpad.runtime.padstate import STATE_FILE
from scratchpad.scrub import scrub
from scratchpad.text import find_control

MARKER = "scratchpad-venv.json"
NAME_FILE = "pad.json"
REQUIREMENTS = "requirements.txt"
HOST_PTH = "_scratchpad_host.pth"
KEEP_ON_REBUILD = ("requirements.txt", "history.jsonl", "accepted.jsonl", NAME_FILE, STATE_FILE)
KEEP_DIRS_ON_REBUILD = ("checkpoint",)  # the pad's variables (runtime/checkpoint.py)
PLAIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
CREATE_TIMEOUT_S = 60.0
OUTPUT_CAP = 64 * 1024  # characters of an installer's output kept (head and tail)
# uv reads uv.toml / pyproject.toml in its working directory and every parent: it runs from
# the root, where no pad writes (a server's own directory may be a pad's workspace).
TOOL_CWD = Path("/")
# How a pad's helper program runs: its argv wrapped by the pad's launcher, and its environment.
# The pad's launcher around an argv, its environment, and the descriptors it is given.
Confine = tuple[Callable[[list[str]], list[str]], dict[str, str], tuple[int, ...]] | None


def venv_python(root: Path) -> Path:
    return root / "bin" / "python"


def host_python_version() -> str:
    return platform.python_version()


def is_reusable(root: Path) -> bool:
    """True when a kernel already started from this venv with the host's Python version.
    (Kernels start from the host's own interpreter, never from the venv's ``bin/``, which the
    pad may rewrite: that is the pad's own to break.)"""
    try:
        marker = json.loads((root / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(marker, dict) and marker.get("python_version") == host_python_version()


def mark_verified(root: Path) -> None:
    """Record that a kernel started from this venv (:func:`is_reusable`), and make the pad's
    directory private (installers make it 0755; what they put inside keeps its modes)."""
    record = {"python_version": host_python_version(), "base_python": sys.executable}
    atomic_write_text(root / MARKER, json.dumps(record, indent=2) + "\n", mode=PRIVATE_FILE_MODE)
    private_dir(root, tighten=True)


def record_name(root: Path, name: str) -> None:
    """Keep the pad's real name beside its venv (listing directories gives it back)."""
    if read_name(root) != name:
        text = json.dumps({"name": name}) + "\n"
        atomic_write_text(root / NAME_FILE, text, mode=PRIVATE_FILE_MODE)


def read_name(root: Path) -> str | None:
    """The name recorded by :func:`record_name`, or None."""
    try:
        data = json.loads((root / NAME_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    name = data.get("name") if isinstance(data, dict) else None
    return name if isinstance(name, str) else None


PAD_FILES = ("pyvenv.cfg", MARKER, NAME_FILE, REQUIREMENTS, "history.jsonl", STATE_FILE)
VENV_ENTRIES = frozenset(
    {*PAD_FILES, "bin", "lib", "lib64", "include", "share", "tmp", ".gitignore", "CACHEDIR.TAG"}
)  # what a pad's directory holds, whole or half-made by an earlier version


async def remove(root: Path) -> None:
    """Delete a pad's directory, refusing anything that does not look like one: a bug that
    pointed ``root`` elsewhere must never delete a directory that is not ours."""
    if not root.exists() and not root.is_symlink():
        return
    check_ours(root)
    await asyncio.to_thread(shutil.rmtree, root, True)


def check_ours(root: Path) -> None:
    """Refuse (VenvError) a directory that is no pad's: a symlink, a file, or a directory
    that holds none of a pad's files and other things than a venv's."""
    if root.is_symlink() or not root.is_dir():
        raise VenvError(f"refusing to delete {root}: it is not a pad's directory")
    names = {entry.name for entry in root.iterdir()}
    if not names <= VENV_ENTRIES and not names & set(PAD_FILES):
        raise VenvError(
            f"refusing to delete {root}: it holds none of a pad's files ({', '.join(PAD_FILES)})"
        )


async def create(root: Path, name: str | None = None) -> None:
    """(Re)create the venv at ``root``, keeping its requirements, history and name files
    (``name`` recorded when given). Built aside (``.<dir>.new-*`` beside it) and renamed into
    place: a failure (a full disk) leaves the pad as it was, and nothing half-made."""
    private_dir(root.parent)
    await asyncio.to_thread(_clear_aside, root)
    staging = _aside(root, "new")
    try:
        error = await _create_with_uv(staging)
        if error is not None:
            await asyncio.to_thread(shutil.rmtree, staging, True)
            await asyncio.to_thread(_create_with_stdlib, staging)
        _link_host_packages(staging)
        await asyncio.to_thread(_put_in_place, staging, root, name)
    finally:
        await asyncio.to_thread(shutil.rmtree, staging, True)  # gone once put in place


def _aside(root: Path, kind: str) -> Path:
    """A directory beside ``root`` for a venv being built (``new``) or replaced (``old``);
    its leading dot keeps it out of the pad list."""
    return root.with_name(f".{root.name}.{kind}-{secrets.token_hex(6)}")


def _clear_aside(root: Path) -> None:
    """Remove what a crash left beside ``root`` (one server per home builds its pads)."""
    stale = re.compile(rf"\.{re.escape(root.name)}\.(new|old)-[0-9a-f]{{12}}")
    for entry in root.parent.iterdir():
        if stale.fullmatch(entry.name) and entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)


def _put_in_place(staging: Path, root: Path, name: str | None) -> None:
    """Make the venv built at ``staging`` the pad's at ``root``: the kept files linked in
    (no copy, no space), the name recorded, the old directory swapped out and deleted."""
    _retarget(staging, root)
    replacing = root.exists() or root.is_symlink()
    if replacing:
        check_ours(root)
        for kept in KEEP_ON_REBUILD:
            if (root / kept).is_file() and not (root / kept).is_symlink():
                _keep(root / kept, staging / kept)
        for kept in KEEP_DIRS_ON_REBUILD:  # moved whole: the kernel alone reads them
            if (root / kept).is_dir() and not (root / kept).is_symlink():
                os.rename(root / kept, staging / kept)
    if name is not None:
        record_name(staging, name)
    if not replacing:
        os.rename(staging, root)
        return
    old = _aside(root, "old")
    os.rename(root, old)
    try:
        os.rename(staging, root)
    except BaseException:
        os.rename(old, root)
        raise
    shutil.rmtree(old, ignore_errors=True)


def _keep(source: Path, target: Path) -> None:
    """``source``'s file at ``target`` too: a hard link, else a copy (mode kept)."""
    try:
        os.link(source, target, follow_symlinks=False)
    except OSError as exc:
        if exc.errno in NO_SPACE:
            raise
        shutil.copy2(source, target, follow_symlinks=False)


def _retarget(staging: Path, root: Path) -> None:
    """The activation scripts and ``pyvenv.cfg`` name the venv's directory: ``root``, not the
    place it was built."""
    old, new = str(staging), str(root)
    for path in [*staging.glob("bin/activate*"), staging / "pyvenv.cfg"]:
        if path.is_file() and not path.is_symlink():
            text = path.read_text(encoding="utf-8", errors="surrogateescape")
            if old in text:
                path.write_text(text.replace(old, new), "utf-8", "surrogateescape")


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
        "--prompt",
        _prompt(root),
        str(root),
    ]
    code, output = await run_tool(argv, CREATE_TIMEOUT_S)
    return None if code == 0 else f"uv venv failed ({code}): {output}"


def _create_with_stdlib(root: Path) -> None:
    import venv

    builder = venv.EnvBuilder(
        system_site_packages=True, with_pip=False, symlinks=True, prompt=_prompt(root)
    )
    try:
        builder.create(root)
    except Exception as exc:
        if isinstance(exc, OSError) and exc.errno in NO_SPACE:
            raise disk_full(root.parent, exc.errno) from exc
        raise VenvError(
            f"could not create a virtualenv at {root} with uv or the venv module: {exc}. "
            "Check free disk space and permissions of that directory."
        ) from exc


def _prompt(staging: Path) -> str:
    """The name a shell shows for the venv: its pad directory's, not the staging one's."""
    return staging.name[1:].rsplit(".new-", 1)[0]


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
        atomic_write_text(root / REQUIREMENTS, "\n".join(merged) + "\n", mode=PRIVATE_FILE_MODE)


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
    kept also when it had to be stopped). With ``confine`` (the pad's launcher around the
    argv, and an environment) it runs confined, as the pad: an installer runs the pad's own
    interpreter, and with it whatever ``.pth`` files the pad wrote."""
    wrap, base, fds = confine if confine is not None else (None, dict(os.environ), ())
    env = {**base, "UV_NO_PROGRESS": "1", "UV_PYTHON_DOWNLOADS": "never"}
    if wrap is not None:
        argv = wrap(argv)
    try:
        result = await procgroup.run(
            argv, timeout=timeout, cwd=TOOL_CWD, env=env, output_cap_chars=OUTPUT_CAP,
            pass_fds=fds,
        )  # fmt: skip
    except OSError as exc:
        return 127, str(exc)
    code = None if result.timed_out else result.returncode
    return code, scrub(result.output.strip())  # an index URL may carry a token
