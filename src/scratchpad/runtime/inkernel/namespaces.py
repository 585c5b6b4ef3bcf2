"""Linux namespaces and mounts through ctypes, for a pad's launcher (standard library only).

What a pad sees of the file system is a *view* the server computes (see
``scratchpad.runtime.sandboxing.pad_view``) and :func:`apply_view` builds in a mount
namespace of the pad's own, before any code of the pad runs:

- ``hide``: an empty tmpfs over a directory (the Scratchpad home; as root, a directory the
  pad's identity could not pass through), sealed read-only once what it keeps is bound back;
- ``rw`` / ``ro``: a directory or file bound at its own path (inside a hidden one: bound
  back), writable or read-only; as root the writable ones are *idmapped*, so a pad running
  under its own identity writes files that stay the server user's on disk;
- ``pin``: a directory bound onto itself, so it cannot be renamed or removed from inside the
  pad (a mount point cannot be): the way to something guarded stays where the server
  expects it.

Plus a private ``/dev`` (``null``, ``zero``, ``full``, ``random``, ``urandom``, its own
``shm`` and ``pts``) and a ``/proc`` of the pad's own PID namespace.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from scratchpad.runtime.inkernel.sandbox import failed, libc
else:
    from sandbox import failed, libc  # a sibling (the launcher puts this directory on sys.path)

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWIPC = 0x20000, 0x10000000, 0x20000000, 0x8000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
# Flags of a mount that a bind remount must repeat (a user namespace locks them).
LOCKED_FLAGS = MS_NOSUID | MS_NODEV | MS_NOEXEC | 1024 | 2048 | (1 << 21)
SYS_OPEN_TREE, SYS_MOVE_MOUNT, SYS_MOUNT_SETATTR = 428, 429, 442  # the same on every arch
OPEN_TREE_CLONE, AT_RECURSIVE, AT_EMPTY_PATH = 1, 0x8000, 0x1000
MOVE_MOUNT_F_EMPTY_PATH, MOUNT_ATTR_IDMAP = 4, 0x100000
AT_FDCWD = -100
DEVICES = ("null", "zero", "full", "random", "urandom")
DEV_LINKS = {
    "fd": "/proc/self/fd",
    "stdin": "/proc/self/fd/0",
    "stdout": "/proc/self/fd/1",
    "stderr": "/proc/self/fd/2",
    "ptmx": "pts/ptmx",
}


def _enc(value: str | None) -> bytes | None:
    return None if value is None else value.encode()


# -- namespaces ------------------------------------------------------------------------------
def unshare(flags: int) -> None:
    if libc().unshare(flags) != 0:  # type: ignore[attr-defined]
        raise failed("unshare")


def setns(fd: int, kind: int) -> None:
    if libc().setns(fd, kind) != 0:  # type: ignore[attr-defined]
        raise failed("setns")


def write_id_maps(pid: str, uid_map: str, gid_map: str, *, deny_setgroups: bool) -> None:
    """Write a user namespace's id maps (``pid``: "self" or a process id)."""
    if deny_setgroups:
        with open(f"/proc/{pid}/setgroups", "w") as file:
            file.write("deny")
    for name, text in (("uid_map", uid_map), ("gid_map", gid_map)):
        with open(f"/proc/{pid}/{name}", "w") as file:
            file.write(text)


def own_user_namespace() -> None:
    """A user namespace of this process's own, with the same ids inside as outside (what an
    unprivileged user may make): files keep their owner; the namespace gives the rights to
    mount in namespaces of its own, and counts the pad's processes apart from the user's."""
    uid, gid = os.getuid(), os.getgid()
    unshare(CLONE_NEWUSER)
    write_id_maps("self", f"{uid} {uid} 1", f"{gid} {gid} 1", deny_setgroups=True)


def user_namespace(uid_map: str, gid_map: str) -> int:
    """An fd of a new user namespace with these maps (made by a short-lived child; for root,
    which may map any ids): for :func:`setns`, or an idmapped mount."""
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child only holds the namespace until the parent has opened it
        try:
            os.close(ready_r)
            os.close(go_w)
            libc().unshare(CLONE_NEWUSER)  # type: ignore[attr-defined]
            os.write(ready_w, b".")
            os.read(go_r, 1)
        finally:
            os._exit(0)
    os.close(ready_w)
    os.close(go_r)
    try:
        if os.read(ready_r, 1) != b".":
            raise OSError("could not make a user namespace")
        write_id_maps(str(pid), uid_map, gid_map, deny_setgroups=False)
        return os.open(f"/proc/{pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        os.close(ready_r)
        os.close(go_w)  # the child goes
        os.waitpid(pid, 0)


# -- mounts ----------------------------------------------------------------------------------
def mount(
    source: str | None, target: str, kind: str | None, flags: int, data: str | None = None
) -> None:
    if libc().mount(_enc(source), _enc(target), _enc(kind), flags, _enc(data)) != 0:  # type: ignore[attr-defined]
        raise failed(f"mount({target})")


def make_private() -> None:
    """Nothing mounted in this namespace propagates out (or in)."""
    mount(None, "/", None, MS_REC | MS_PRIVATE)


def read_only(path: str) -> None:
    """Remount the mount at ``path`` read-only, keeping the flags a namespace locks."""
    flags = os.statvfs(path).f_flag & LOCKED_FLAGS
    mount(None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | flags)


def _mount_point(path: str, directory: bool) -> None:
    """Make ``path`` exist as what a bind needs there (in a tmpfs of ours)."""
    if directory:
        os.makedirs(path, exist_ok=True)
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if not os.path.exists(path):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))


def bind(fd: int, target: str, *, writable: bool, idmap: int | None = None) -> None:
    """Bind what ``fd`` (O_PATH) opened at ``target`` (with what is mounted below it);
    read-only unless ``writable``; through ``idmap`` (a user namespace fd) when given."""
    import stat

    _mount_point(target, stat.S_ISDIR(os.fstat(fd).st_mode))
    if idmap is None:
        mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | MS_REC)
    else:
        _idmapped_bind(fd, target, idmap)
    if not writable:
        read_only(target)


def _idmapped_bind(fd: int, target: str, userns: int) -> None:
    import ctypes
    import struct

    call = libc().syscall  # type: ignore[attr-defined]
    flags = OPEN_TREE_CLONE | os.O_CLOEXEC | AT_RECURSIVE | AT_EMPTY_PATH
    tree = call(SYS_OPEN_TREE, fd, b"", flags)
    if tree < 0:
        raise failed(f"open_tree({target})")
    try:
        attr = ctypes.create_string_buffer(struct.pack("<QQQQ", MOUNT_ATTR_IDMAP, 0, 0, userns))
        if call(SYS_MOUNT_SETATTR, tree, b"", AT_EMPTY_PATH | AT_RECURSIVE, attr, 32) != 0:
            raise failed(f"an idmapped mount of {target}")
        if call(SYS_MOVE_MOUNT, tree, b"", AT_FDCWD, target.encode(), MOVE_MOUNT_F_EMPTY_PATH):
            raise failed(f"move_mount({target})")
    finally:
        os.close(tree)


def apply_view(view: Sequence[Sequence[str]], idmap: int | None = None) -> None:
    """Build the pad's view of the file system (see the module docstring): ``view`` is a list
    of (kind, path) in the order to apply them (parents first). Every source is opened before
    anything is mounted: a tmpfs over a directory hides the originals below it. A source that
    does not exist is left out (nothing to give)."""
    sources: dict[str, int] = {}
    hidden: list[str] = []
    try:
        for kind, path in view:
            if kind != "hide":
                try:
                    sources[path] = os.open(path, os.O_PATH | os.O_CLOEXEC)
                except FileNotFoundError:
                    continue
        for kind, path in view:
            if kind != "hide" and path not in sources:
                continue
            if kind == "hide":
                if not os.path.isdir(path):
                    continue  # nothing there to hide
                mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k")
                hidden.append(path)
            elif kind == "pin":
                bind(sources[path], path, writable=True, idmap=idmap)
            elif kind in ("rw", "ro"):
                writable = kind == "rw"
                bind(sources[path], path, writable=writable, idmap=idmap if writable else None)
            else:
                raise ValueError(f"unknown view entry {kind!r} for {path}")
        for path in hidden:
            read_only(path)
    finally:
        for fd in sources.values():
            os.close(fd)


def private_dev(shm_bytes: int) -> None:
    """A /dev of the pad's own: the harmless devices of the host bound in, its own shared
    memory (``shm_bytes``) and pseudo-terminals; no disk, no terminal of the user."""
    devices = {name: os.open(f"/dev/{name}", os.O_PATH | os.O_CLOEXEC) for name in DEVICES}
    try:
        mount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k")
        for name, fd in devices.items():
            bind(fd, f"/dev/{name}", writable=True)
    finally:
        for fd in devices.values():
            os.close(fd)
    os.mkdir("/dev/shm")
    mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size={shm_bytes}")
    os.mkdir("/dev/pts")
    mount(
        "devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"
    )
    for name, target in DEV_LINKS.items():
        os.symlink(target, f"/dev/{name}")
    read_only("/dev")


def mount_proc() -> None:
    """A /proc of this PID namespace (called by its first process)."""
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
