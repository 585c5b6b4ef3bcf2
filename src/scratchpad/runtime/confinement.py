"""What confines pads on this machine, decided once per server process, and the spec a pad's
launcher (``inkernel/confine.py``) applies to each of its processes.

The mechanisms, each used where this system has it (:func:`support` asks the real launcher,
in a throwaway directory, what works here):

- **Landlock** (Linux >= 5.13): the file-system rights of ``sandboxing.pad_rules``;
- **namespaces** (user, mount, PID, IPC; root, or a user who may make user namespaces): the
  home hidden, a private /dev and /proc, every process of the pad in a PID namespace that
  dies with its kernel, a process limit counted for the pad alone;
- **identity** (a server run as root): pads run as ``SCRATCHPAD_PAD_USER`` (default
  ``nobody``) in a user namespace of their own, their writable directories idmapped.

Where one is missing the next holds what it can (Landlock alone keeps the home unreadable;
without namespaces a kernel's descendants are found by process group, subreaper and tag);
the server says so at start and in ``/v1/server`` (:func:`report`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from scratchpad.config import Settings
from scratchpad.errors import ConfigError, SandboxError
from scratchpad.fsutil import private_dir
from scratchpad.runtime import limits, sandboxing
from scratchpad.runtime.inkernel import sandbox

log = logging.getLogger(__name__)
INKERNEL = Path(__file__).parent / "inkernel"
CONFINE_SCRIPT = INKERNEL / "confine.py"
PROBE_TIMEOUT_S = 30.0
SHM_BYTES = 64 << 20
NAMESPACES_OFF = "off (SCRATCHPAD_NAMESPACES=off)"


@dataclass(frozen=True)
class Support:
    """What confines pads here: Landlock's ABI (0: none), whether namespaces work (and why
    not), the identity pads run as (root only; None: the server's own)."""

    sandbox: str  # "auto" | "require" | "off"
    landlock_abi: int
    namespaces: bool
    namespaces_note: str = ""
    identity: tuple[int, int] | None = None
    identity_note: str = ""

    @property
    def off(self) -> bool:
        return self.sandbox == "off"


_support: dict[tuple[str, str, str], Support] = {}


def _key(settings: Settings) -> tuple[str, str, str]:
    return (settings.sandbox, settings.namespaces, settings.pad_user)


def support(settings: Settings) -> Support:
    """What works here (probed once per process and setting; see the module docstring)."""
    key = _key(settings)
    if key not in _support:
        _support[key] = _probe(settings)
    return _support[key]


def downgrade(settings: Settings, paths: sandboxing.PadPaths, why: str) -> bool:
    """A pad's launcher refused a start with ``why``: ask again, over this pad's own paths,
    what works; when less does, use that from now on (unless the setting requires it) and
    say so. False when nothing changed: the start failed for a reason of its own."""
    current = support(settings)
    if current.sandbox == "require" or not current.namespaces:
        return False
    now = _probe(settings, paths)
    if (now.namespaces, now.identity) == (current.namespaces, current.identity):
        return False
    log.warning("pads start with less confinement from now on (%s): %s", _namespaces_line(now), why)
    _support[_key(settings)] = now
    return True


def _probe(settings: Settings, paths: sandboxing.PadPaths | None = None) -> Support:
    """Ask the launcher what works: namespaces with the pad identity (root), namespaces
    alone, or neither; over ``paths``, else a pad-like layout in a throwaway directory."""
    abi = sandbox.landlock_abi()
    base = Support(settings.sandbox, abi, namespaces=False)
    if settings.sandbox == "off":
        return base
    if settings.namespaces == "off":
        return replace(base, namespaces_note=NAMESPACES_OFF)
    identity = pad_identity(settings) if os.geteuid() == 0 else None
    why = _try_launch(settings, identity, paths)
    if why is None:
        return replace(base, namespaces=True, identity=identity)
    if identity is not None and _try_launch(settings, None, paths) is None:
        return replace(base, namespaces=True, identity_note=f"could not switch: {why}")
    return replace(base, namespaces_note=why)


def _try_launch(
    settings: Settings, identity: tuple[int, int] | None, paths: sandboxing.PadPaths | None
) -> str | None:
    """Run the real launcher once with namespaces (and ``identity``) over ``paths`` (None: a
    pad-like layout in a throwaway directory); None when it worked, else why not. It only
    builds the view and exits: nothing of a pad runs."""
    if paths is not None:
        return _launch_once(settings, identity, paths)
    place = Path(tempfile.mkdtemp(prefix=".probe-", dir=private_dir(settings.home)))
    try:
        root, workspace = place / "home" / "pads" / "p", place / "work"
        for directory in (root / "bin", root / "tmp", workspace):
            directory.mkdir(parents=True)
        (root / "pyvenv.cfg").write_text("")
        layout = sandboxing.PadPaths(
            home=place / "home",
            workspace=workspace,
            root=root,
            tmp=root / "tmp",
            server=sandboxing.server_paths(),
        )
        return _launch_once(settings, identity, layout)
    finally:
        shutil.rmtree(place, ignore_errors=True)


def _launch_once(
    settings: Settings, identity: tuple[int, int] | None, paths: sandboxing.PadPaths
) -> str | None:
    spec = {
        "namespaces": True,
        "identity": identity,
        "view": sandboxing.pad_view(paths, identity),
        "rules": sandboxing.pad_rules(paths, namespaces=True) if sandbox_on(settings) else None,
        "cwd": str(paths.workspace),
        "shm_bytes": 1 << 20,
    }
    argv = [sandboxing.BASE_PYTHON, *sandboxing.TRUSTED_FLAGS, str(CONFINE_SCRIPT), "--probe"]
    try:
        with passed(spec) as fd:
            done = subprocess.run(
                [*argv, f"--spec-fd={fd}"],
                capture_output=True,
                timeout=PROBE_TIMEOUT_S,
                cwd="/",
                env={"PATH": os.defpath},
                check=False,
                pass_fds=(fd,),
            )
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    return None if done.returncode == 0 else done.stderr.decode(errors="replace").strip()


def sandbox_on(settings: Settings) -> bool:
    return settings.sandbox != "off" and sandbox.landlock_abi() > 0


def pad_identity(settings: Settings) -> tuple[int, int]:
    """The uid and gid pads of a root server run as: ``SCRATCHPAD_PAD_USER``, a user name or
    ``uid[:gid]``."""
    import pwd

    value = settings.pad_user.strip()
    if value.replace(":", "").isdigit():
        uid, _, gid = value.partition(":")
        found = int(uid), int(gid or uid)
    else:
        try:
            entry = pwd.getpwnam(value)
        except KeyError:
            raise ConfigError(
                f"SCRATCHPAD_PAD_USER={value!r} names no user here; give an existing user name, "
                "or uid[:gid] (e.g. 65534:65534)"
            ) from None
        found = entry.pw_uid, entry.pw_gid
    if 0 in found:
        raise ConfigError(
            f"SCRATCHPAD_PAD_USER={value!r} is root (uid or gid 0): pads would own root's "
            "files; give an unprivileged user, e.g. nobody or 65534:65534"
        )
    return found


# -- one process's spec -------------------------------------------------------------------------
def spec(settings: Settings, paths: sandboxing.PadPaths, limits: dict[str, int]) -> dict[str, Any]:
    """What the launcher applies to one of the pad's processes (see ``inkernel/confine.py``).
    SandboxError when ``SCRATCHPAD_SANDBOX=require`` and Landlock is missing."""
    found = support(settings)
    if found.sandbox == "require" and found.landlock_abi <= 0:
        raise SandboxError(
            "SCRATCHPAD_SANDBOX=require but this kernel has no Landlock (Linux >= 5.13 with "
            "landlock in the lsm= boot list); run there, or set SCRATCHPAD_SANDBOX=auto"
        )
    namespaces = found.namespaces and not found.off
    applied = {**limits, "core": 0}
    if not namespaces:  # counted per user, not per pad: it would hold the user's processes too
        applied.pop("processes", None)
    result: dict[str, Any] = {"parent_pid": os.getpid(), "cwd": str(paths.workspace)}
    result["limits"] = applied
    if found.off:
        return result
    rules = sandboxing.pad_rules(paths, namespaces=namespaces)
    return {
        **result,
        "namespaces": namespaces,
        "identity": found.identity if namespaces else None,
        "view": sandboxing.pad_view(paths, found.identity) if namespaces else [],
        "rules": rules,
        "listed": [path for path, mode in rules if mode == "list"],  # for its notes
        "require": found.sandbox == "require",
        "shm_bytes": SHM_BYTES,
    }


def program_argv(spec_fd: int, argv: list[str]) -> list[str]:
    """``argv`` run by the launcher under the spec in descriptor ``spec_fd`` (see
    :func:`passed`; the installer, the shell tool)."""
    return [
        sandboxing.BASE_PYTHON,
        *sandboxing.TRUSTED_FLAGS,
        str(CONFINE_SCRIPT),
        f"--spec-fd={spec_fd}",
        *argv,
    ]


@contextlib.contextmanager
def passed(data: dict[str, Any]) -> Iterator[int]:
    """``data`` as JSON in a sealed anonymous file whose descriptor a child is given
    (``pass_fds``) instead of an argument: a spec names every entry beside the home on the
    way to it, which may outgrow what one argument can hold (128 KiB)."""
    fd = os.memfd_create("scratchpad-spec", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        body = memoryview(json.dumps(data).encode())
        while body:
            body = body[os.write(fd, body) :]
        seals = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
        os.lseek(fd, 0, os.SEEK_SET)
        yield fd
    finally:
        os.close(fd)


def contained(spec_: dict[str, Any]) -> bool:
    """Whether every process started under ``spec_`` dies with it (its PID namespace)."""
    return bool(spec_.get("namespaces"))


# -- what the server says ---------------------------------------------------------------------
def report(settings: Settings) -> dict[str, Any]:
    """What confines pads here, mechanism by mechanism (``/v1/server``, the README's table):
    ``sandbox`` (+ ``sandbox_abi``) as before, and ``confinement``."""
    found = support(settings)
    state = "off" if found.off else "landlock" if found.landlock_abi > 0 else "unavailable"
    answer: dict[str, Any] = {"sandbox": state}
    if state == "landlock":
        answer["sandbox_abi"] = found.landlock_abi
    answer["confinement"] = {
        "landlock": state if state != "landlock" else f"ABI {found.landlock_abi}",
        "namespaces": _namespaces_line(found),
        "home": _home_line(found, state),
        "identity": _identity_line(found),
        "devices": "a private /dev (null, zero, full, random, urandom, its own shm and pts)"
        if found.namespaces
        else "null, zero, full, random, urandom and /dev/shm (Landlock)"
        if state == "landlock"
        else "every device the server's user may open",
        "processes": "a PID namespace per kernel: every descendant dies with it"
        if found.namespaces
        else "the kernel's process group, a child subreaper and a tag in the environment",
        "limits": limits.describe(
            limits.PadLimits.from_settings(settings), namespaces=found.namespaces
        ),
    }
    return answer


def _namespaces_line(found: Support) -> str:
    if found.off:
        return "off (SCRATCHPAD_SANDBOX=off)"
    if found.namespaces:
        return "user, mount, PID and IPC namespaces per kernel"
    if found.namespaces_note == NAMESPACES_OFF:
        return NAMESPACES_OFF
    return f"unavailable: {found.namespaces_note or 'not tried'}"


def _home_line(found: Support, state: str) -> str:
    if found.namespaces and not found.off:
        return "hidden (an empty read-only tmpfs in the pad's mount namespace)"
    if state == "landlock":
        return "unreadable (Landlock), its directory names listable"
    return "reachable: pads can read and write all the server's user can"


def _identity_line(found: Support) -> str:
    if found.identity is not None:
        return f"uid {found.identity[0]}, gid {found.identity[1]}, no groups, no capabilities"
    root = os.geteuid() == 0
    if found.off:
        return "the server's user" + (" (root, with its capabilities)" if root else "")
    if not root:
        return f"the server's user (uid {os.geteuid()}), no capabilities"
    note = f" ({found.identity_note})" if found.identity_note else ""
    return (
        f"root without capabilities{note}: it can read every file root owns and Landlock "
        "leaves readable (/etc/shadow, /root), and connect as root to every unix socket "
        "(Docker's or systemd's would give it the machine)"
    )


def warnings(settings: Settings) -> list[str]:
    """Banner lines for every mechanism that is missing here (none when all hold)."""
    found = support(settings)
    if found.off:
        return ["  sandbox: off (SCRATCHPAD_SANDBOX=off): pads can read and write all you can"]
    lines = []
    if found.landlock_abi <= 0:
        lines.append(
            "  sandbox: unavailable (no Landlock in this kernel): pads can read and write "
            "all you can, including this home"
        )
    if not found.namespaces:
        lines.append(f"  namespaces: {_namespaces_line(found)}")
    if os.geteuid() == 0 and found.identity is None:
        lines.append(f"  identity: pads run as {_identity_line(found)}")
    return lines
