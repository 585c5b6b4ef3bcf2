"""The pad trust boundary, server side: which paths a kernel may reach, and its environment.

A pad is code the model wrote. Its kernel gets an allowlisted environment (never the
server's keys or settings) and, where Landlock exists, a ruleset built here and applied by the
kernel at boot (see ``inkernel/sandbox.py``): read-only to the whole file system except the
Scratchpad home; read-write to the workspace (except the home), the pad's venv directories,
its own temp directory and /dev.

Landlock rights cover whole subtrees and there are no deny rules, so "T except the home H" is
built by descent: each directory on the way from T down to H gets READ_DIR only (names, not
contents), every other entry of it the full rights. The price: nothing can be created
directly in such a directory, and entries added to it after the kernel started stay out of
reach until the kernel restarts.

The workspace is where that price would hurt (a bound workspace keeps its home inside), so
there, where the system allows it, the kernel first hides the home in a mount namespace of
its own (an empty read-only tmpfs, the pad's venv directories bound back; see
``inkernel/sandbox.hide``) and the whole workspace is granted.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from scratchpad.config import Settings
from scratchpad.errors import SandboxError
from scratchpad.fsutil import private_dir
from scratchpad.runtime.inkernel import sandbox

log = logging.getLogger(__name__)

Rule = tuple[str, str]  # (path, "list" | "ro" | "rw")

# Inherited from the server as they are (when set); everything else is left behind.
ENV_ALLOWED = (
    "PATH",
    "HOME",
    "LANG",
    "TZ",
    "TERM",
    "USER",
    "LOGNAME",
    "SHELL",
    "MPLBACKEND",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "all_proxy",
)
ENV_ALLOWED_PREFIXES = ("LC_",)
DEFAULT_MPL_BACKEND = "module://_scratchpad_mpl_backend"
VENV_DIRS = ("bin", "lib", "lib64", "include", "share", "etc")  # the pad may install there
VENV_READ_ONLY = ("pyvenv.cfg",)  # read by every interpreter it starts; never rewritten
TMP_DIR = "tmp"


def pad_environment(source: Mapping[str, str], *, root: Path, tmp: Path) -> dict[str, str]:
    """The kernel's environment: the allowlisted variables of ``source``, the venv, and temp and
    cache directories inside the pad's own ``tmp`` (writable under the sandbox)."""
    env = {
        name: value
        for name, value in source.items()
        if name in ENV_ALLOWED or name.startswith(ENV_ALLOWED_PREFIXES)
    }
    env.setdefault("MPLBACKEND", DEFAULT_MPL_BACKEND)
    env["PATH"] = f"{root / 'bin'}{os.pathsep}{source.get('PATH', os.defpath)}"
    env.update(
        PYTHONUTF8="1",
        VIRTUAL_ENV=str(root),
        TMPDIR=str(tmp),
        XDG_CACHE_HOME=str(tmp / "cache"),
        MPLCONFIGDIR=str(tmp / "matplotlib"),
        PIP_CACHE_DIR=str(tmp / "cache" / "pip"),
        UV_CACHE_DIR=str(tmp / "cache" / "uv"),
    )
    return env


def installer_environment(source: Mapping[str, str], *, root: Path, tmp: Path) -> dict[str, str]:
    """The pad's environment plus the server's installer settings (UV_*), its cache kept in
    the pad's own ``tmp`` (the only place a sandboxed installer can write one)."""
    env = pad_environment(source, root=root, tmp=tmp)
    env.update(
        (name, value)
        for name, value in source.items()
        if name.startswith("UV_") and name != "UV_CACHE_DIR"
    )
    return env


# -- paths ----------------------------------------------------------------------------------
def _real(path: Path | str) -> Path:
    return Path(os.path.realpath(path))


def _holds(tree: Path, path: Path) -> bool:
    """Whether ``path`` is ``tree`` or lies below it (both resolved)."""
    return path == tree or tree in path.parents


def around(tree: Path, homes: Path | Iterable[Path], mode: str) -> list[Rule]:
    """Rules granting ``mode`` on ``tree`` except each of ``homes`` (all resolved), by
    descent."""
    excluded = [homes] if isinstance(homes, Path) else list(homes)
    if any(_holds(home, tree) for home in excluded):
        return []  # the tree is inside a home: nothing of it
    inside = [home for home in excluded if _holds(tree, home)]
    if not inside:
        return [(str(tree), mode)]
    steps = sorted({tree / home.relative_to(tree).parts[0] for home in inside})
    rules: list[Rule] = [(str(tree), "list")]
    for child in _entries(tree):
        if child not in steps and not any(_reaches(child, home) for home in inside):
            rules.append((str(child), mode))
    for step in steps:
        rules += around(step, inside, mode)
    return rules


def _entries(directory: Path) -> list[Path]:
    """The entries of a resolved directory, symlinks resolved (only they cost a realpath)."""
    try:
        with os.scandir(directory) as scan:
            found = [(entry.name, entry.is_symlink()) for entry in scan]
    except OSError:
        return []
    return [_real(directory / name) if link else directory / name for name, link in sorted(found)]


def _reaches(path: Path, home: Path) -> bool:
    """Whether a rule on ``path`` would cover some of the home (a symlink into it, or above)."""
    return _holds(home, path) or _holds(path, home)


def pad_rules(
    *,
    home: Path,
    workspace: Path,
    root: Path,
    tmp: Path,
    hidden: bool = False,
    guarded: Iterable[Path] = (),
) -> list[Rule]:
    """Every rule of one pad's kernel (see the module docstring); ``hidden``: the kernel
    hides the home in a mount namespace (see :func:`hide_spec`), so the whole workspace is
    granted; so is a workspace inside the home (a pad's own, see workdir.py). ``guarded``:
    more directories kept out of reach like the home, except where they hold the workspace
    (a credential probe's pads: the server's home holds theirs)."""
    home = _real(home)
    rules = around(Path("/"), [home, *map(_real, guarded)], "ro")
    workspace = _real(workspace)
    own = home in workspace.parents  # the pad's own directory under the home (workdir.py)
    rules += [(str(workspace), "rw")] if hidden or own else around(workspace, home, "rw")
    rules += [(str(root / name), "rw") for name in VENV_DIRS if (root / name).exists()]
    rules += [(str(root / name), "ro") for name in VENV_READ_ONLY]
    rules += [(str(tmp), "rw"), ("/dev", "rw")]
    return rules


def hide_spec(
    settings: Settings, *, workspace: Path, root: Path, tmp: Path
) -> dict[str, object] | None:
    """What a starting kernel hides, when the home lies inside its workspace and this system
    lets a process mount in a namespace of its own: the home, as an empty read-only tmpfs,
    with the pad's venv directories and temp directory bound back (``pyvenv.cfg`` read-only).
    None when the home is elsewhere (nothing to hide) or hiding is not possible here."""
    home, workspace = _real(settings.home), _real(workspace)
    if not _holds(workspace, home) or status(settings)[0] != "landlock" or not can_hide():
        return None
    root, tmp = _real(root), _real(tmp)
    keep = [(str(root / name), True) for name in VENV_DIRS if (root / name).exists()]
    keep += [(str(tmp), True)] + [(str(root / name), False) for name in VENV_READ_ONLY]
    return {"home": str(home), "keep": keep}


_hiding: dict[str, bool] = {}  # "works": the probe's answer, once asked


def can_hide() -> bool:
    """Whether kernels here can hide the home (asked once, of a child process: a namespace
    is for good)."""
    if "works" not in _hiding:
        probe = [sys.executable, "-I", "-S", sandbox.__file__, "--can-hide"]
        try:
            done = subprocess.run(probe, capture_output=True, timeout=30, check=False)
            _hiding["works"] = done.returncode == 0
        except (OSError, subprocess.SubprocessError):
            _hiding["works"] = False
    return _hiding["works"]


def hiding_failed(why: str) -> None:
    """A kernel could not hide the home although the probe could: stop trying."""
    log.warning("pads cannot hide the Scratchpad home here (%s); they get the narrower rules", why)
    _hiding["works"] = False


def fresh_tmp(root: Path) -> Path:
    """The pad's temp and cache directory, created empty (0700) for a starting kernel."""
    tmp = root / TMP_DIR
    clear_tmp(root)
    private_dir(tmp)
    return tmp


def clear_tmp(root: Path) -> None:
    """Remove what the last kernel left in its temp directory (never follows a symlink)."""
    tmp = root / TMP_DIR
    if tmp.is_symlink():
        tmp.unlink()
    elif tmp.exists():
        shutil.rmtree(tmp, ignore_errors=True)


# -- the decision ---------------------------------------------------------------------------
def status(settings: Settings) -> tuple[str, int]:
    """("landlock", abi) when pads are sandboxed, ("off", 0) when the setting says so,
    ("unavailable", 0) when this kernel has no Landlock."""
    if settings.sandbox == "off":
        return "off", 0
    abi = sandbox.landlock_abi()
    return ("landlock", abi) if abi > 0 else ("unavailable", 0)


def ruleset_for(settings: Settings, rules: Callable[[], list[Rule]]) -> int | None:
    """The ruleset fd for a starting kernel, or None when it runs unsandboxed (off, or
    ``auto`` without Landlock). SandboxError when ``require`` cannot be met."""
    state, abi = status(settings)
    require = settings.sandbox == "require"
    if state == "off":
        return None
    if state == "unavailable":
        if require:
            raise SandboxError(
                "SCRATCHPAD_SANDBOX=require but this kernel has no Landlock (Linux >= 5.13 with "
                "landlock in the lsm= boot list); run there, or set SCRATCHPAD_SANDBOX=auto"
            )
        return None
    try:
        return sandbox.create_ruleset(abi, rules())
    except OSError as exc:
        if require:
            raise SandboxError(
                f"the pad's Landlock rules could not be built ({exc}); "
                "set SCRATCHPAD_SANDBOX=auto to run pads unsandboxed"
            ) from exc
        log.warning("pad runs unsandboxed: its Landlock rules could not be built (%s)", exc)
        return None


def report(settings: Settings) -> dict[str, object]:
    """What ``/v1/server`` says of the sandbox: ``sandbox`` (+ ``sandbox_abi`` when on)."""
    state, abi = status(settings)
    return {"sandbox": state, "sandbox_abi": abi} if abi else {"sandbox": state}


def warning(settings: Settings) -> str | None:
    """The banner line when pads run unsandboxed (None when they are sandboxed)."""
    state, _ = status(settings)
    if state == "off":
        return "  sandbox: off (SCRATCHPAD_SANDBOX=off): pads can read and write all you can"
    if state == "unavailable":
        return (
            "  sandbox: unavailable (no Landlock in this kernel): pads can read and write "
            "all you can, including this home"
        )
    return None
