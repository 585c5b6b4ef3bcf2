"""The pad trust boundary, server side: what a pad's processes may reach of the file system,
and their environment. Applied by the pad's launcher (``inkernel/confine.py``).

A pad gets read-write on its working directory, its venv's directories and its own temp
directory, read-only on everything else, and nothing of the Scratchpad home or of what the
server runs (its interpreter, its packages). Two ways, by what this system allows:

- **With mount namespaces** (:func:`pad_view`): the home is *hidden*, an empty read-only
  tmpfs with the pad's own directories bound back; what the server imports that lies inside
  a writable directory is bound read-only over itself; the directories on the way to either
  are *pinned* (bound over themselves: a mount point cannot be renamed), so nothing can be
  moved into their place. As root, the pad runs as an unprivileged uid: its writable
  directories are idmapped for it, and a directory it could not pass through on the way to
  something it needs is hidden the same way, only that thing bound back. Landlock then
  grants read-only on ``/`` and read-write on the pad's directories and ``/dev`` (a private
  one).
- **Landlock alone** (:func:`pad_rules`): rights cover whole subtrees and there are no deny
  rules, so "T except the home H" is built by descent: each directory on the way from T down
  to H gets READ_DIR only (names, not contents), every other entry of it the full rights.
  The price: nothing can be created directly in such a directory, and entries added to it
  after the kernel started stay out of reach until the kernel restarts.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from scratchpad.fsutil import private_dir

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
CHECKPOINT_DIR = "checkpoint"  # the kernel's checkpoints of its variables (runtime/checkpoint.py)
HARMLESS_DEVICES = ("null", "zero", "full", "random", "urandom", "shm")  # Landlock alone


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


@dataclass(frozen=True)
class PadPaths:
    """Where one pad's processes live: its working directory, its venv (``root``), its temp
    directory; and what is kept from them: the home, ``guarded`` directories (kept out like
    the home) and the server's own code (``server``: read-only even inside the workspace)."""

    home: Path
    workspace: Path
    root: Path
    tmp: Path
    guarded: tuple[Path, ...] = ()
    server: tuple[Path, ...] = ()

    def granted(self) -> list[Rule]:
        """What the pad may change (and ``pyvenv.cfg``, read by every interpreter it starts
        and never rewritten)."""
        root = _real(self.root)
        rules: list[Rule] = [(str(_real(self.workspace)), "rw")]
        rules += [(str(root / name), "rw") for name in VENV_DIRS if (root / name).exists()]
        rules += [(str(_real(self.tmp)), "rw")]
        if (root / CHECKPOINT_DIR).is_dir() and not (root / CHECKPOINT_DIR).is_symlink():
            rules += [(str(root / CHECKPOINT_DIR), "rw")]
        rules += [(str(root / name), "ro") for name in VENV_READ_ONLY]
        return rules

    def hidden(self) -> list[Path]:
        return [_real(self.home), *map(_real, self.guarded), *USER_RUNTIME_DIRS]


def user_runtime_dirs() -> tuple[Path, ...]:
    """The server user's runtime directory (``XDG_RUNTIME_DIR``, ``/run/user/<uid>``): the
    sockets of their ssh-agent, D-Bus session and keyring live there, and Landlock cannot
    refuse a ``connect`` to a socket, so a pad's view hides the directory instead."""
    found = {os.environ.get("XDG_RUNTIME_DIR") or "", f"/run/user/{os.getuid()}"}
    return tuple(sorted({_real(Path(path)) for path in found if path and os.path.isdir(path)}))


USER_RUNTIME_DIRS = user_runtime_dirs()  # read once, as the server's own paths are


def server_paths() -> tuple[Path, ...]:
    """What the server runs and imports: its interpreter's directories, every directory on
    its ``sys.path``, this package, the installer's directory (read by pads, never theirs)."""
    import scratchpad

    found = {Path(sys.base_prefix), Path(sys.prefix), Path(BASE_PYTHON).parent}
    found |= {Path(entry) for entry in sys.path if entry and os.path.isdir(entry)}
    found.add(Path(scratchpad.__file__).parent)
    uv = shutil.which("uv", path=str(Path(sys.executable).parent))
    if uv is not None:
        found.add(Path(uv).parent)
    return tuple(sorted({_real(path) for path in found}))


# The interpreter every process of a pad starts from (the host's, never a pad's venv), and how:
# isolated (no site, no environment, no script directory on sys.path), in UTF-8 mode.
BASE_PYTHON = os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)
TRUSTED_FLAGS = ("-I", "-S", "-X", "utf8")


def pad_rules(paths: PadPaths, *, namespaces: bool) -> list[Rule]:
    """The Landlock rules of a pad's process. With ``namespaces`` its view hides what it must
    not reach (see :func:`pad_view`): read-only on ``/``, its own directories and its private
    /dev read-write. Without, by descent around the home, the guarded directories (one that
    holds the workspace keeps all of it but the workspace) and the server's code (see the
    module docstring); of /dev only the harmless devices."""
    if namespaces:
        return [("/", "ro"), *paths.granted(), ("/dev", "rw")]
    hidden = paths.hidden()
    workspace = _real(paths.workspace)
    kept = [path for path in hidden if not _inside_any(workspace, [path])]  # all but around it
    kept += [path for path in paths.server if _holds(workspace, path)]
    rules = around(Path("/"), [*hidden, Path("/dev")], "ro")
    rules += around(workspace, kept, "rw")
    rules += [(path, mode) for path, mode in paths.granted() if path != str(workspace)]
    return rules + [(f"/dev/{name}", "rw") for name in HARMLESS_DEVICES]


def pad_view(paths: PadPaths, identity: tuple[int, int] | None = None) -> list[tuple[str, str]]:
    """The mount operations that build a pad's view, parents first (see the module docstring
    and ``inkernel/namespaces.apply_view``): ``hide``, ``rw`` / ``ro`` binds, ``pin``.
    ``identity``: the uid and gid the pad runs as (root only), which must be able to pass
    through to everything it is given."""
    visible: dict[Path, str] = {Path(path): mode for path, mode in paths.granted()}
    for path in paths.server:
        visible.setdefault(path, "ro")
    hides = set(paths.hidden())
    if identity is not None:
        hides |= blocked_ancestors(visible, *identity)
    writable = [path for path, mode in visible.items() if mode == "rw"]
    ops: dict[Path, str] = {}
    for hide in hides:
        if _inside_any(hide, hides) and not _inside_any(hide, visible):
            continue  # already out of sight
        ops[hide] = "hide"
    for path, mode in visible.items():
        if _needs_bind(path, mode, ops, visible, idmapped=identity is not None):
            ops[path] = mode
    for path, kind in list(ops.items()):  # what a pad could move away and put back forged
        area = _nearest_above(path, [*ops, *visible])
        if kind in ("hide", "ro") and area in writable and ops.get(area) != "hide":
            for step in _between(area, path):
                ops.setdefault(step, "pin")
    order = sorted(ops, key=lambda path: (len(path.parts), str(path)))
    return [(ops[path], str(path)) for path in order]


def _inside_any(path: Path, trees: Iterable[Path]) -> bool:
    return any(tree != path and _holds(tree, path) for tree in trees)


def _needs_bind(
    path: Path, mode: str, ops: dict[Path, str], visible: dict[Path, str], *, idmapped: bool
) -> bool:
    """Whether ``path`` must be bound: brought back into a hidden directory, given another
    mode than the directory around it, or (as root) idmapped to be writable."""
    nearest = _nearest_above(path, [*ops, *visible])
    if nearest is None:  # on the real file system as it is
        return mode == "rw" and idmapped
    if ops.get(nearest) == "hide":
        return True
    return visible.get(nearest) != mode


def _nearest_above(path: Path, trees: Iterable[Path]) -> Path | None:
    """The deepest of ``trees`` that holds ``path`` (not ``path`` itself)."""
    above = [tree for tree in trees if tree != path and _holds(tree, path)]
    return max(above, key=lambda tree: len(tree.parts)) if above else None


def _between(top: Path, bottom: Path) -> list[Path]:
    """The directories strictly between ``top`` and ``bottom`` (``top`` holds ``bottom``)."""
    return [parent for parent in bottom.parents if parent != top and _holds(top, parent)]


def blocked_ancestors(paths: Iterable[Path], uid: int, gid: int) -> set[Path]:
    """For each path, the topmost directory on the way to it that ``uid``/``gid`` (and no
    other group) may not pass through."""
    found: set[Path] = set()
    for path in paths:
        for step in [*reversed(path.parents)]:
            if _search_blocked(step, uid, gid):
                found.add(step)
                break
    return found


def _search_blocked(directory: Path, uid: int, gid: int) -> bool:
    try:
        info = directory.stat()
    except OSError:
        return False
    if info.st_uid == uid:
        return not info.st_mode & 0o100
    if info.st_gid == gid:
        return not info.st_mode & 0o010
    return not info.st_mode & 0o001


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
