"""The pad's launcher: the whole confinement, applied by the trusted interpreter before
anything the pad can write is run, imported or read as code (standard library only).

The server starts ``python -I -S`` (the base interpreter, by absolute path) on a file of
this package — the kernel's ``worker.py``, or this file for a program (the installer, the
shell tool) — with a *spec* it computed (see ``scratchpad.runtime.confinement``).
:func:`launch` then runs, in order:

1. with namespaces (``spec["namespaces"]``): as an ordinary user a user namespace of the
   pad's own (same ids), then mount, PID and IPC namespaces; the file-system view
   (``namespaces.apply_view``: the home hidden, the pad's directories bound back, the way
   to guarded paths pinned), a private ``/dev``. Then two forks: the *holder* (this process,
   outside) waits and ends the way the kernel ends; the namespace's *init* (PID 1) mounts its
   ``/proc``, starts the kernel and reaps orphans. When the kernel dies, init exits and Linux
   kills every process left in the namespace: nothing a cell started outlives its pad. Each
   dies with its parent (``PR_SET_PDEATHSIG``), up to the server.
2. in the process that carries on (the kernel): the pad's own identity when the server is
   root (a user namespace where it is an unprivileged uid, no groups), its working
   directory, resource limits, ``no_new_privs``, the Landlock ruleset built from
   ``spec["rules"]`` (after the mounts, so it sees the pad's view), every capability
   dropped, default signal dispositions.

Only then does control pass to the pad: the worker loads ``site`` from the pad's venv, or
this script executes the program. A later fork server can call :func:`launch` in a
pre-started interpreter the same way.

As a script: ``confine.py --spec-fd=N PROGRAM [ARGS...]`` (run PROGRAM confined by the spec
read from descriptor N), or ``confine.py --probe --spec-fd=N`` (exit 0 when a launch with that
spec works here; prints why not).
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any, NoReturn

    from scratchpad.runtime.inkernel import namespaces, sandbox
else:
    _here = os.path.dirname(os.path.abspath(__file__))
    if _here not in sys.path:
        sys.path.insert(0, _here)
    import namespaces  # siblings, by path: nothing of the scratchpad package
    import sandbox

PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 1, 4, 36
SIGINT, SIGTERM, SIGKILL, SIGHUP = 2, 15, 9, 1
RESET_SIGNALS = (1, 2, 3, 10, 12, 13, 14, 15)  # HUP INT QUIT USR1 USR2 PIPE ALRM TERM
RLIMITS = {"processes": 6, "file_bytes": 1, "address_space": 9, "core": 4}  # RLIMIT_*


class Refused(Exception):
    """The confinement could not be applied (the message says which step, and why)."""


def launch(spec: dict[str, Any], keep: Iterable[int] = ()) -> str:
    """Apply ``spec`` to this process (see the module docstring); returns in the process
    that carries on as the pad, with what holds ("landlock", or why not). ``keep``: the fds
    the pad's process keeps (its control channel); the holder and init close them. Raises
    :class:`Refused` when a step fails (before any code of the pad ran)."""
    if TYPE_CHECKING:
        import signal as _signal
    else:
        import _signal  # the signal module would import enum: milliseconds at boot
    import resource  # noqa: F401 - loaded while every directory can still be reached

    kept = set(keep)
    die_with_parent(spec.get("parent_pid"))
    userns = None
    if spec.get("namespaces"):
        userns = _step("the namespaces", lambda: _enter_namespaces(spec, _signal))
    else:
        _subreaper()  # descendants that leave the group stay below the kernel
    if spec.get("identity"):
        _step("the pad's identity", lambda: _become(spec["identity"], userns))
    os.chdir(spec.get("cwd") or "/")
    _step("the limits", lambda: _limit(spec.get("limits") or {}))
    held = str(_step("the sandbox", lambda: _sandbox(spec)))
    for signum in RESET_SIGNALS:
        _signal.signal(signum, _signal.SIG_DFL)
    # a mask is inherited from the thread that started us (a Ray actor's blocks SIGINT):
    # the pad's signals must arrive, or an interrupt could never stop a cell
    _signal.pthread_sigmask(_signal.SIG_SETMASK, [])
    _close_others(kept)
    return held


def _step(what: str, action: Callable[[], Any]) -> Any:
    try:
        return action()
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise Refused(f"{what} could not be applied: {exc}") from exc


# -- the namespaces, the holder and init -------------------------------------------------------
def _enter_namespaces(spec: dict[str, Any], _signal: Any) -> int | None:
    """Namespaces, view, /dev, holder and init (see the module docstring); in the kernel's
    process, returns the fd of the user namespace it is to enter (root only)."""
    identity = spec.get("identity")
    idmap = userns = None
    if identity:  # root: user namespaces made for the pad (its own, and the idmap's)
        uid, gid = identity
        idmap = namespaces.user_namespace(f"0 {uid} 1", f"0 {gid} 1")
        userns = namespaces.user_namespace(f"{uid} {uid} 1", f"{gid} {gid} 1")
    else:
        namespaces.own_user_namespace()
    namespaces.unshare(namespaces.CLONE_NEWNS | namespaces.CLONE_NEWPID | namespaces.CLONE_NEWIPC)
    namespaces.make_private()
    try:
        namespaces.apply_view(spec.get("view") or [], idmap)
    finally:
        if idmap is not None:
            os.close(idmap)
    namespaces.private_dev(int(spec.get("shm_bytes") or 64 << 20))
    for signum in (SIGINT, SIGHUP):
        _signal.signal(signum, _signal.SIG_IGN)  # the kernel's to answer; not ours
    status_r, status_w = os.pipe()
    init = os.fork()
    if init:
        os.close(status_w)
        _hold(init, status_r, _signal)
    os.close(status_r)
    die_with_parent(None)
    namespaces.mount_proc()
    kernel = os.fork()
    if kernel:
        _init(kernel, status_w)
    os.close(status_w)
    die_with_parent(None)
    return userns


def _quiet(keep: int) -> None:
    """Close everything but ``keep`` and point 0, 1, 2 at /dev/null: the holder and init
    must not keep the kernel's channel or output pipes open after it is gone."""
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.closerange(3, keep)
    os.closerange(keep + 1, _max_fd())


def _hold(init: int, status_r: int, _signal: Any) -> NoReturn:
    """The holder (outside the namespace): wait for init, then end as the kernel ended.
    SIGTERM ends the whole namespace at once (init's death kills everything in it)."""
    _signal.signal(SIGTERM, lambda signum, frame: os.kill(init, SIGKILL))
    _quiet(status_r)
    _, status = os.waitpid(init, 0)
    data = os.read(status_r, 16)
    if data:
        status = int(data)
    if os.WIFEXITED(status):
        os._exit(os.WEXITSTATUS(status))
    signum = os.WTERMSIG(status)
    _signal.signal(signum, _signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    os._exit(128 + signum)


def _init(kernel: int, status_w: int) -> NoReturn:
    """PID 1 of the pad's namespace: reap every process that ends (orphans come here) until
    the kernel ends; tell the holder how, and exit (which ends the namespace)."""
    _quiet(status_w)
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(1)
        if pid == kernel:
            os.write(status_w, str(status).encode())
            os._exit(0)


def _max_fd() -> int:
    try:
        import resource

        return int(resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    except (ImportError, OSError, ValueError):
        return 4096


# -- the process that carries on ---------------------------------------------------------------
def die_with_parent(parent_pid: object) -> None:
    """Ask Linux to kill this process when its parent dies (even a SIGKILLed one); when the
    parent died already (``parent_pid`` given and no longer ours), exit."""
    if sandbox.libc().prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0:  # type: ignore[attr-defined]
        raise sandbox.failed("prctl(PR_SET_PDEATHSIG)")
    if isinstance(parent_pid, int) and os.getppid() != parent_pid:
        os._exit(1)


def _subreaper() -> None:
    sandbox.libc().prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)  # type: ignore[attr-defined]


def _become(identity: list[int], userns: int | None) -> None:
    """Root only: no groups, then into the pad's user namespace as its unprivileged uid."""
    uid, gid = identity
    os.setgroups([])
    if userns is not None:
        namespaces.setns(userns, namespaces.CLONE_NEWUSER)
        os.close(userns)
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    libc = sandbox.libc()
    libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # type: ignore[attr-defined]  # its own /proc/self
    die_with_parent(None)  # a change of credentials clears it


def _limit(limits: dict[str, Any]) -> None:
    import resource

    for name, value in limits.items():
        if name == "nice":  # never below where it runs (raising priority needs privilege;
            # a Ray worker, or a server started with nice, runs niced already)
            now = os.getpriority(os.PRIO_PROCESS, 0)
            os.setpriority(os.PRIO_PROCESS, 0, max(now, int(value)))
        elif name in RLIMITS and value is not None:
            resource.setrlimit(RLIMITS[name], (int(value), int(value)))


def _sandbox(spec: dict[str, Any]) -> str:
    """Landlock from ``spec["rules"]`` (none: unsandboxed), no_new_privs, no capabilities."""
    rules = spec.get("rules")
    if rules is None:
        return "off"
    abi = sandbox.landlock_abi()
    if abi <= 0:
        if spec.get("require"):
            raise OSError("this kernel has no Landlock")
        sandbox.no_new_privs()
        sandbox.drop_capabilities()
        return "unavailable"
    sandbox.restrict_self(sandbox.create_ruleset(abi, [(str(p), str(m)) for p, m in rules]))
    own = [str(path) for path, mode in rules if mode == "rw" and path not in ("/", "/dev")]
    sandbox.hold(spec.get("listed") or (), hiding=bool(spec.get("namespaces")), own=own)
    return "landlock"


def _close_others(kept: set[int]) -> None:
    """Nothing of the server's reaches the pad but its channel (and 0, 1, 2)."""
    last = 2
    for fd in sorted(kept):
        os.closerange(last + 1, fd)
        last = fd
    os.closerange(last + 1, _max_fd())


# -- as a script ---------------------------------------------------------------------------------
SPEC_FD = "--spec-fd="  # the spec comes by descriptor: it outgrows one argument (128 KiB)


def read_json_fd(argument: str) -> Any:
    """The JSON a parent wrote into the descriptor ``--spec-fd=N`` (or ``--config-fd=N``)
    names; the descriptor is closed (nothing of the pad inherits it)."""
    import json

    fd = int(argument.partition("=")[2])
    chunks = []
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return json.loads(b"".join(chunks))


def main(argv: list[str]) -> int:
    if len(argv) >= 3 and argv[1] == "--probe":
        try:
            launch(read_json_fd(argv[2]))
        except Refused as exc:
            print(exc, file=sys.stderr)
            return 1
        return 0
    if len(argv) < 3 or not argv[1].startswith(SPEC_FD):
        print(
            "usage: confine.py --spec-fd=N PROGRAM [ARGS...] | confine.py --probe --spec-fd=N",
            file=sys.stderr,
        )
        return 2
    try:
        launch(read_json_fd(argv[1]))
    except (Refused, ValueError, OSError) as exc:
        print(f"scratchpad: could not confine {argv[2]}: {exc}", file=sys.stderr)
        return 126
    try:
        os.execv(argv[2], argv[2:])
    except OSError as exc:
        print(f"scratchpad: could not run {argv[2]}: {exc}", file=sys.stderr)
    return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv))
