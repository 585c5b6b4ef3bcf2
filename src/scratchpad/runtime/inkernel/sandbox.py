"""Landlock through ctypes: probe the ABI, build a ruleset, restrict a process (stdlib only).

The server builds the ruleset (it knows which paths a pad may reach, see
``scratchpad.runtime.sandboxing``) and hands its file descriptor to the kernel, which applies
it at boot with two system calls, before any code the pad can change runs. A ruleset only
ever narrows: Landlock has no deny rules, and the rights of a rule cover the whole subtree.

Run as a script (``python -I -S sandbox.py FD PROGRAM ARGS...``) it restricts itself with
the ruleset FD and executes PROGRAM: how helper programs (the installer) run sandboxed.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446  # x86_64 and aarch64
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38
PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 24, 47, 4
CAPABILITY_VERSION_3 = 0x20080522
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1, 2
CLONE_NEWNS, CLONE_NEWUSER = 0x00020000, 0x10000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_PRIVATE = 1, 2, 4, 32, 4096, 1 << 18
MS_REC = 16384
LOCKED_FLAGS = 2 | 4 | 8 | 1024 | 2048 | (1 << 21)  # nosuid nodev noexec noatime ... relatime

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1, 2, 4, 8
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 16, 32, 64, 128
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 256, 512, 1024, 2048, 4096
REFER, TRUNCATE, IOCTL_DEV = 8192, 16384, 32768
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # all a file can carry
READ_ONLY = EXECUTE | READ_FILE | READ_DIR
MODES = ("list", "ro", "rw")  # what a rule grants: names only, read + execute, everything


def handled_rights(abi: int) -> int:
    """Every file-system right this ABI knows (all of them are handled, so denied by default)."""
    rights = (MAKE_SYM << 1) - 1
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


def mode_rights(mode: str, abi: int) -> int:
    """The rights of a rule of ``mode`` (one of MODES) under this ABI."""
    if mode == "list":
        return READ_DIR
    if mode == "ro":
        return READ_ONLY
    if mode == "rw":
        return handled_rights(abi)
    raise ValueError(f"unknown sandbox mode {mode!r}; use one of {MODES}")


def _libc() -> object:
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def _fail(what: str) -> OSError:
    import ctypes

    errno = ctypes.get_errno()
    return OSError(errno, f"{what} failed: {os.strerror(errno)}")


def landlock_abi() -> int:
    """The Landlock ABI version of the running kernel; 0 where Landlock is missing."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        abi = int(_libc().syscall(SYS_CREATE_RULESET, None, 0, CREATE_RULESET_VERSION))  # type: ignore[attr-defined]
    except (OSError, AttributeError):
        return 0
    return max(abi, 0)


def create_ruleset(abi: int, rules: Iterable[tuple[str, str]]) -> int:
    """A ruleset fd (close-on-exec) granting ``rules`` — (path, mode) pairs; paths that do not
    exist are skipped, rules on files keep only file rights. OSError when Landlock refuses."""
    import ctypes
    import struct

    libc = _libc()
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0
    attr = struct.pack("<QQQ", handled_rights(abi), 0, scoped)
    size = 8 if abi <= 3 else 16 if abi <= 5 else 24
    buffer = ctypes.create_string_buffer(attr[:size], size)
    fd = libc.syscall(SYS_CREATE_RULESET, buffer, ctypes.c_size_t(size), 0)  # type: ignore[attr-defined]
    if fd < 0:
        raise _fail("landlock_create_ruleset")
    try:
        for path, mode in rules:
            _add_rule(libc, fd, path, mode_rights(mode, abi))
    except BaseException:
        os.close(fd)
        raise
    return int(fd)


def _add_rule(libc: object, ruleset: int, path: str, rights: int) -> None:
    import ctypes
    import stat
    import struct

    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # gone, or unreachable: nothing to grant
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= FILE_RIGHTS
        attr = ctypes.create_string_buffer(struct.pack("<Qi", rights, fd), 12)
        if libc.syscall(SYS_ADD_RULE, ruleset, RULE_PATH_BENEATH, attr, 0) != 0:  # type: ignore[attr-defined]
            raise _fail(f"landlock_add_rule({path})")
    finally:
        os.close(fd)


def restrict_self(ruleset: int) -> None:
    """Apply the ruleset to this process (and everything it starts); closes the fd."""
    libc = _libc()
    try:
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:  # type: ignore[attr-defined]
            raise _fail("prctl(PR_SET_NO_NEW_PRIVS)")
        if libc.syscall(SYS_RESTRICT_SELF, ruleset, 0) != 0:  # type: ignore[attr-defined]
            raise _fail("landlock_restrict_self")
    finally:
        os.close(ruleset)
    drop_capabilities(libc)


def drop_capabilities(libc: object) -> None:
    """Give up every capability, for good (a pad the root user started would keep them all:
    CAP_SYS_ADMIN or CAP_PERFMON reads /proc/<server>/environ past Landlock). Nothing to do
    for an ordinary user."""
    import ctypes

    if _effective_capabilities() == 0:
        return
    for cap in range(64):  # the bounding set first (needs CAP_SETPCAP): exec cannot regain them
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != 22:  # type: ignore[attr-defined]
            raise _fail(f"prctl(PR_CAPBSET_DROP, {cap})")
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)  # type: ignore[attr-defined]
    header = (ctypes.c_uint32 * 2)(CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable; twice (64 bits)
    if libc.capset(header, data) != 0:  # type: ignore[attr-defined]
        raise _fail("capset")


def _effective_capabilities() -> int:
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("CapEff:"):
                    return int(line.split()[1], 16)
    except (OSError, ValueError):
        pass
    return 0


def hide(home: str, keep: Iterable[tuple[str, bool]]) -> None:
    """Put this process in a mount namespace of its own where ``home`` is an empty read-only
    tmpfs, with each ``keep`` (path below the home, writable) bound back in its place: what
    lets a pad write anywhere in a workspace that holds the home, which Landlock alone cannot
    (a right on a directory covers all below it). A user namespace too, unless root. OSError
    when the system does not allow it."""
    libc = _libc()
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(CLONE_NEWNS | (CLONE_NEWUSER if uid else 0)) != 0:  # type: ignore[attr-defined]
        raise _fail("unshare")
    if uid:  # the same ids inside as outside: files keep their owner
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1")):
            with open(f"/proc/self/{name}", "w") as file:
                file.write(text)
        with open("/proc/self/gid_map", "w") as file:
            file.write(f"{gid} {gid} 1")
    _mount(libc, None, "/", None, MS_REC | MS_PRIVATE)  # nothing of this leaks out
    kept = [(os.open(path, os.O_PATH | os.O_CLOEXEC), path, rw) for path, rw in keep]
    try:
        _mount(libc, "tmpfs", home, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0700,size=64k")
        for fd, path, writable in kept:
            _bind(libc, fd, path, writable)
        _mount(libc, "tmpfs", home, "tmpfs", MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    finally:
        for fd, _, _ in kept:
            os.close(fd)


def _bind(libc: object, fd: int, path: str, writable: bool) -> None:
    """Bind what ``fd`` opened at ``path`` (a mount point made for it in the tmpfs)."""
    import stat

    if stat.S_ISDIR(os.fstat(fd).st_mode):
        os.makedirs(path, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        open(path, "a").close()
    _mount(libc, f"/proc/self/fd/{fd}", path, None, MS_BIND)
    if not writable:  # the flags the original mount has must stay (a user namespace locks them)
        flags = os.statvfs(path).f_flag & LOCKED_FLAGS
        _mount(libc, None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | flags)


def _mount(
    libc: object, source: str | None, target: str, kind: str | None, flags: int, data: str = ""
) -> None:
    def text(value: str | None) -> bytes | None:
        return None if value is None else value.encode()

    if libc.mount(text(source), text(target), text(kind), flags, text(data) if data else None) != 0:  # type: ignore[attr-defined]
        raise _fail(f"mount({target})")


def can_hide() -> bool:
    """Whether :func:`hide` works here (tried on a directory of its own; for a child
    process: the namespace it makes is this process's for good)."""
    import tempfile

    place = tempfile.mkdtemp(prefix="scratchpad-probe-")
    try:
        hide(place, [])
        return True
    except OSError:
        return False
    finally:
        import contextlib

        _libc().umount2(place.encode(), 2)  # type: ignore[attr-defined]  # MNT_DETACH
        with contextlib.suppress(OSError):
            os.rmdir(place)


# -- in the kernel, once the rules hold: notes for the errors they cause ----------------------
HELD = False  # the Landlock rules hold in this process
# the directories on the way to the home (the pad may list them), with their entries at start
LISTED: dict[str, frozenset[str]] = {}
NOTE = (
    "Note: this pad runs sandboxed. It may write in its working directory, its temp "
    "directory ($TMPDIR) and its venv, and read everything but the Scratchpad home.\n"
)


def hold(listed: Iterable[object]) -> None:
    """Remember that the rules hold, and what the listed directories held at the start."""
    global HELD
    HELD = True
    for path in listed:
        try:
            LISTED[str(path)] = frozenset(os.listdir(str(path)))
        except OSError:
            continue


def refusal_note(exc: BaseException) -> str:
    """What to add to a cell's traceback when the sandbox may be why it failed ("" else)."""
    if not HELD or not isinstance(exc, PermissionError):
        return ""
    try:
        return listed_note(exc.filename) or NOTE
    except (OSError, ValueError):  # a path the sandbox will not even resolve (/proc/1/root)
        return NOTE


def listed_note(filename: object) -> str:
    """The note for a path below a directory on the way to the home whose entry there came
    after the start (the sandbox lets the pad list that directory and reach only the entries
    it had then); "" for any other path."""
    if not isinstance(filename, str | bytes) or not LISTED:
        return ""
    path = os.path.realpath(os.fsdecode(filename))
    child, parent = path, os.path.dirname(path)
    while parent not in LISTED:
        if parent == child:
            return ""
        child, parent = parent, os.path.dirname(parent)
    if os.path.basename(child) in LISTED[parent]:
        return ""  # there at the start: refused for another reason
    return (
        f"Note: this pad runs sandboxed, and {parent} holds the Scratchpad home: in it the pad "
        "reaches only the entries that were there when it started and cannot create new ones. "
        "For an entry added since, reset the pad; keep new files in a subdirectory.\n"
    )


def main(argv: list[str]) -> int:
    """``sandbox.py FD PROGRAM ARGS...``: restrict with ruleset FD, then become PROGRAM.
    ``sandbox.py --can-hide``: exit 0 when :func:`hide` works here."""
    if argv[1:] == ["--can-hide"]:
        return 0 if can_hide() else 1
    if len(argv) < 3:
        print("usage: sandbox.py RULESET_FD PROGRAM [ARGS...]", file=sys.stderr)
        return 2
    try:
        restrict_self(int(argv[1]))
    except (OSError, ValueError) as exc:
        print(f"scratchpad: could not sandbox {argv[2]}: {exc}", file=sys.stderr)
        return 126
    os.execv(argv[2], argv[2:])
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv))
