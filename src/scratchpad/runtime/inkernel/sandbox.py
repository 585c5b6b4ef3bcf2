"""Landlock and capabilities through ctypes: probe the ABI, build a ruleset, restrict a
process, drop every capability (stdlib only); and, in the kernel, the note a refused cell gets.

The server decides which paths a pad may reach (see ``scratchpad.runtime.sandboxing``); the
pad's launcher (``confine.py``) builds the ruleset from them after it built the pad's view of
the file system, and applies it before any code the pad can change runs. A ruleset only ever
narrows: Landlock has no deny rules, and the rights of a rule cover the whole subtree.
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


_LIBC: object = None


def libc() -> object:
    """The C library (loaded once), for system calls Python does not wrap."""
    global _LIBC
    if _LIBC is None:
        import ctypes

        _LIBC = ctypes.CDLL(None, use_errno=True)
    return _LIBC


def failed(what: str) -> OSError:
    """The OSError for a failed call, from errno."""
    import ctypes

    errno = ctypes.get_errno()
    return OSError(errno, f"{what} failed: {os.strerror(errno)}")


def landlock_abi() -> int:
    """The Landlock ABI version of the running kernel; 0 where Landlock is missing."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        abi = int(libc().syscall(SYS_CREATE_RULESET, None, 0, CREATE_RULESET_VERSION))  # type: ignore[attr-defined]
    except (OSError, AttributeError):
        return 0
    return max(abi, 0)


def create_ruleset(abi: int, rules: Iterable[tuple[str, str]]) -> int:
    """A ruleset fd (close-on-exec) granting ``rules`` — (path, mode) pairs; paths that do not
    exist are skipped, rules on files keep only file rights. OSError when Landlock refuses."""
    import ctypes
    import struct

    lib = libc()
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0
    attr = struct.pack("<QQQ", handled_rights(abi), 0, scoped)
    size = 8 if abi <= 3 else 16 if abi <= 5 else 24
    buffer = ctypes.create_string_buffer(attr[:size], size)
    fd = lib.syscall(SYS_CREATE_RULESET, buffer, ctypes.c_size_t(size), 0)  # type: ignore[attr-defined]
    if fd < 0:
        raise failed("landlock_create_ruleset")
    try:
        for path, mode in rules:
            _add_rule(lib, fd, path, mode_rights(mode, abi))
    except BaseException:
        os.close(fd)
        raise
    return int(fd)


def _add_rule(lib: object, ruleset: int, path: str, rights: int) -> None:
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
        if lib.syscall(SYS_ADD_RULE, ruleset, RULE_PATH_BENEATH, attr, 0) != 0:  # type: ignore[attr-defined]
            raise failed(f"landlock_add_rule({path})")
    finally:
        os.close(fd)


def restrict_self(ruleset: int) -> None:
    """Apply the ruleset to this process (and everything it starts), after no_new_privs;
    closes the fd; then every capability goes."""
    try:
        no_new_privs()
        if libc().syscall(SYS_RESTRICT_SELF, ruleset, 0) != 0:  # type: ignore[attr-defined]
            raise failed("landlock_restrict_self")
    finally:
        os.close(ruleset)
    drop_capabilities()


def no_new_privs() -> None:
    """Nothing this process executes can gain privileges (setuid files, file capabilities)."""
    if libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:  # type: ignore[attr-defined]
        raise failed("prctl(PR_SET_NO_NEW_PRIVS)")


def drop_capabilities() -> None:
    """Give up every capability, for good (a pad the root user started, or one in a user
    namespace of its own, would keep them: CAP_SYS_ADMIN or CAP_PERFMON reads
    /proc/<server>/environ past Landlock). Nothing to do for an ordinary process."""
    import ctypes

    if _effective_capabilities() == 0:
        return
    lib = libc()
    for cap in range(64):  # the bounding set first (needs CAP_SETPCAP): exec cannot regain them
        if lib.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != 22:  # type: ignore[attr-defined]
            raise failed(f"prctl(PR_CAPBSET_DROP, {cap})")
    lib.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)  # type: ignore[attr-defined]
    header = (ctypes.c_uint32 * 2)(CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable; twice (64 bits)
    if lib.capset(header, data) != 0:  # type: ignore[attr-defined]
        raise failed("capset")


def _effective_capabilities() -> int:
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("CapEff:"):
                    return int(line.split()[1], 16)
    except (OSError, ValueError):
        pass
    return 0


# -- in the kernel, once the rules hold: notes for the errors they cause ----------------------
HELD = False  # the Landlock rules hold in this process
HIDING = False  # and the pad sees a view of the file system with things hidden
OWN: tuple[str, ...] = ()  # the directories the pad writes in (a missing path there is its own)
# the directories on the way to the home (the pad may list them), with their entries at start
LISTED: dict[str, frozenset[str]] = {}
NOTE = (
    "Note: this pad runs sandboxed. It may write in its working directory, its temp "
    "directory ($TMPDIR) and its venv, and read everything but the Scratchpad home.\n"
)
HIDDEN_NOTE = (
    "Note: this pad runs sandboxed. It may write in its working directory, its temp "
    "directory ($TMPDIR) and its venv, and read the system's files; the Scratchpad home, and "
    "directories its user may not enter, are hidden from it.\n"
)
EROFS = 30


def hold(listed: Iterable[object], *, hiding: bool = False, own: Iterable[str] = ()) -> None:
    """Remember that the rules hold, whether paths are hidden (``hiding``), where the pad
    writes (``own``), and what the listed directories held at the start."""
    global HELD, HIDING, OWN
    HELD, HIDING, OWN = True, hiding, tuple(os.path.realpath(path) for path in own)
    for path in listed:
        try:
            LISTED[str(path)] = frozenset(os.listdir(str(path)))
        except OSError:
            continue


def refusal_note(exc: BaseException) -> str:
    """What to add to a cell's traceback when the sandbox may be why it failed ("" else)."""
    if not HELD or not isinstance(exc, OSError):
        return ""
    note = HIDDEN_NOTE if HIDING else NOTE
    if isinstance(exc, PermissionError):
        try:
            return listed_note(exc.filename) or note
        except (OSError, ValueError):  # a path the sandbox will not even resolve (/proc/1/root)
            return note
    if exc.errno == EROFS or (
        HIDING and isinstance(exc, FileNotFoundError) and _elsewhere(exc.filename)
    ):
        return note
    return ""


def _elsewhere(filename: object) -> bool:
    """Whether ``filename`` is an absolute path outside the pad's own directories (where a
    missing file may be a hidden one)."""
    if not isinstance(filename, str | bytes):
        return False
    path = os.fsdecode(filename)
    if not os.path.isabs(path):
        return False
    path = os.path.normpath(path)
    return not any(path == own or path.startswith(own + os.sep) for own in OWN)


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
