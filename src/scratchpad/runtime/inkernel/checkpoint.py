"""Checkpoints of a pad's variables, kernel side: written after every cell, loaded by a
fresh kernel of the same pad (the only process that ever unpickles them: it runs inside the
pad's sandbox, where the bytes came from).

Standard library only at import; cloudpickle (and dill, only when cloudpickle fails) are
imported on the first checkpoint that has something to write, through the kernel's
name-restricted finder (worker.py) unless the pad installed its own.

Format 1, in the pad's ``checkpoint/`` directory::

    FORMAT                  {"format": 1}
    blobs/<sha256>.pkl      one value, or one aliasing group ({name: value}); never rewritten
    manifests/<number>.json the variables after cell <number>, and the generation of the
                            kernel that wrote them (see :meth:`Checkpointer.manifest`)
    HEAD                    the number of the current manifest, written last

What changed is found without pickling (ids of the bindings, names the cell's code mentions,
the aliasing groups they belong to), so a cell that changed nothing costs one scan of the
namespace and writes nothing. Files are written atomically (temp, fsync, rename), 0600.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import types

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

    from scratchpad.runtime.inkernel import pickling
else:
    try:  # in a kernel: the worker's finder serves its private modules by these names
        import _scratchpad_pickling as pickling
    except ImportError:  # imported as part of the package (tests)
        from scratchpad.runtime.inkernel import pickling

FORMAT = 1
SCALARS = (int, float, complex, str, bytes, bool, type(None))
# What a cell can only replace, never change in place (a name bound to one is dirty only when
# rebound): scalars, modules (recorded as imports), functions without a closure.
UNCHANGING = frozenset({*SCALARS, types.ModuleType, types.FunctionType})
# Objects that never make two names share state (and are memoised by every pickle).
NOT_SHARED = (
    *SCALARS, tuple, frozenset, type, types.FunctionType, types.BuiltinFunctionType,
    types.ModuleType, types.CodeType, types.MethodType, range, slice,
)  # fmt: skip
SECRET_MIN = 8  # characters of an environment secret looked for in a pickle
PENDING_BYTES = 64 << 20  # queued for the disk before a cell waits for it
REPORT_NAMES = 200  # names listed in a report
REPORT_REASONS = 20  # reasons given in a report
NAME_CAP = 100  # characters of one name in a report
REASON_CAP = 200
NEW_BLOBS = 100  # new blobs a report lists by name (more: the server scans them all)


def _code_names(code: types.CodeType, into: set[str]) -> None:
    into.update(code.co_names)
    for const in code.co_consts:
        if type(const) is types.CodeType:
            _code_names(const, into)


def _atomic_write(directory: str, name: str, data: bytes) -> None:
    temp = os.path.join(directory, f".{name}.{os.getpid()}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NONBLOCK, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(temp, os.path.join(directory, name))


def _fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _private_dir(path: str) -> str:
    """``path``, a directory of the checkpoint's: a link or a file a cell left in its place
    goes first (the checkpoint is written here, never through it)."""
    if os.path.islink(path) or (os.path.lexists(path) and not os.path.isdir(path)):
        os.unlink(path)
    os.makedirs(path, mode=0o700, exist_ok=True)
    return path


def _read(path: str, cap: int = -1) -> bytes:
    """A file's bytes (at most ``cap``), never waiting on a FIFO a cell put in its place."""
    with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), "rb") as file:
        return file.read(cap)


def read_format(directory: str) -> None:
    """Refuse a checkpoint written by a newer Scratchpad."""
    try:
        found = json.loads(_read(os.path.join(directory, "FORMAT"), 4096)).get("format")
    except FileNotFoundError:
        return
    except (OSError, ValueError, AttributeError) as exc:
        raise ValueError(f"unreadable FORMAT file ({exc})") from None
    if type(found) is not int or found > FORMAT:
        raise ValueError(f"written by a newer Scratchpad (format {found}); upgrade or reset")


class _Groups:
    """Union-find over names whose pickles share objects."""

    def __init__(self, idsets: dict[str, frozenset[int]]) -> None:
        self.parent = {name: name for name in idsets}
        owner: dict[int, str] = {}
        for name, ids in idsets.items():
            for ident in ids:
                other = owner.setdefault(ident, name)
                if other != name:
                    self.union(name, other)

    def find(self, name: str) -> str:
        parent = self.parent
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)

    def members(self) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for name in self.parent:
            found.setdefault(self.find(name), []).append(name)
        return found


class Checkpointer:
    """The checkpoints of one kernel's namespace (see the module docstring)."""

    def __init__(
        self, namespace: dict[str, Any], skip: Iterable[object], config: dict[str, Any]
    ) -> None:
        self.namespace = namespace
        self.skip_ids = {id(value) for value in skip}
        self.directory = str(config["dir"])
        self.var_cap = int(config.get("var_cap") or 256 << 20)
        self.pad_cap = int(config.get("pad_cap") or 1024 << 20)
        self.keep = int(config.get("keep") or 2)
        self.sweep_cells = int(config.get("sweep_cells") or 50)
        self.generation = int(config.get("generation") or 0)  # of this kernel
        self.workspace = str(config.get("workspace") or "")
        self.secret_env = [str(name) for name in config.get("secret_env") or ()]
        self.key_shapes = pickling.key_shapes(config.get("key_shapes") or ())
        self.base_path = list(config.get("base_path") or sys.path)  # before any cell
        self.ids: dict[str, int] = {}  # name -> id(value) at the last checkpoint
        self.entries: dict[str, dict[str, Any]] = {}  # name -> its manifest entry
        self.idsets: dict[str, frozenset[int]] = {}  # name -> ids its pickle memoised
        self.failed: dict[str, tuple[int, str]] = {}  # name -> (id(value), why)
        self.failed_in: dict[str, int] = {}  # name -> the cell that bound what failed
        self.modules: dict[str, str] = {}
        self.from_imports: dict[str, str] = {}
        self.cells = 0
        self.number = 0  # of the cell being checkpointed (or last checkpointed, or restored)
        self.cell_id = ""  # its id
        self.last_body = ""  # the last manifest written or restored, but its cell (_body)
        self.late: list[str] = []  # write failures of the last checkpoint, told next time
        self.unwritten = False  # a write failed: the next checkpoint writes everything again
        self.writer: Any = None  # the writer thread's condition, from the first write
        self.pending: list[tuple[dict[str, bytes], bytes, int, int]] = []  # oldest first
        self.pending_bytes = 0
        self.format_checked = False
        self.serializers: dict[str, Any] = {}
        self.last_path: list[str] = list(self.base_path)

    # -- what changed -------------------------------------------------------------------------
    def saved_names(self) -> dict[str, object]:
        """The namespace's variables worth saving (modules and importable names included)."""
        skip = self.skip_ids
        return {
            name: value
            for name, value in self.namespace.items()
            if name[:1] != "_" and id(value) not in skip
        }

    def dirty(self, current: dict[str, object], codes: Iterable[Any], full: bool) -> set[str]:
        """The names to pickle again (see the module docstring)."""
        ids = self.ids
        if full:
            return {name for name in current if name not in self.modules}
        changed = {name for name, value in current.items() if ids.get(name) != id(value)}
        mentioned: set[str] = set()
        for code in codes:
            if code is not None:
                _code_names(code, mentioned)
        seen: set[str] = set()
        todo = [name for name in mentioned if name in current]
        while todo:  # the namespace's functions the cell called mention more names
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            value = current[name]
            if type(value) is types.FunctionType and value.__globals__ is self.namespace:
                extra: set[str] = set()
                _code_names(value.__code__, extra)
                todo += [other for other in extra if other in current and other not in seen]
        for name in seen:  # named, and of a kind a cell can change in place
            value = current[name]
            if type(value) not in UNCHANGING or getattr(value, "__closure__", None):
                changed.add(name)
        if changed and any(len(group) > 1 for group in self._groups().values()):
            groups = _Groups(self.idsets)
            for members in groups.members().values():
                if len(members) > 1 and changed.intersection(members):
                    changed.update(name for name in members if name in current)
        return changed

    def _groups(self) -> dict[str, list[str]]:
        groups: dict[str, list[str]] = {}
        for name, entry in self.entries.items():
            groups.setdefault(entry["blob"], []).append(name)
        return groups

    # -- one checkpoint -------------------------------------------------------------------------
    def after_cell(
        self, cell_id: str, number: int, codes: Iterable[Any], full: bool = False
    ) -> dict[str, Any] | None:
        """Checkpoint what the cell changed; the outcome for its ``done`` frame (None when
        nothing changed and nothing is to be told)."""
        began = time.perf_counter()
        sweep = not cell_id  # asked by the server (before sleep, fork, a stop): not a cell
        if sweep:  # the state after the last cell, as it is now
            cell_id, number = self.cell_id, self.number
        else:
            self.cells += 1
        full = full or sweep or self.unwritten or self.cells % self.sweep_cells == 0
        self.unwritten = False
        current = self.saved_names()
        removed = [name for name in self.ids if name not in current]
        dirty = self.dirty(current, codes, full)
        path_changed = sys.path != self.last_path
        if not dirty and not removed and not path_changed:
            if not self.late:
                return None
            late, self.late = self.late, []
            return {"late": late[:REPORT_REASONS]}
        try:
            outcome = self._checkpoint(current, dirty, removed, cell_id, number)
        except OSError as exc:
            outcome = {"wrote": 0, "bytes": 0, "failed": {}, "error": f"checkpoint failed: {exc}"}
        outcome["ms"] = round((time.perf_counter() - began) * 1000, 3)
        return outcome

    def _checkpoint(
        self, current: dict[str, object], dirty: set[str], removed: list[str], cell_id: str,
        number: int,
    ) -> dict[str, Any]:  # fmt: skip
        for name in removed:
            self.ids.pop(name, None)
            self.entries.pop(name, None)
            self.idsets.pop(name, None)
            self.failed.pop(name, None)
            self.failed_in.pop(name, None)
            self.modules.pop(name, None)
            self.from_imports.pop(name, None)
        defined = {"cell_id": cell_id, "number": number}
        self.number, self.cell_id = number, cell_id
        new_failures: dict[str, str] = {}
        pickled: dict[str, bytes] = {}
        sers: dict[str, str] = {}
        for name in sorted(dirty):
            value = current[name]
            rebound = self.ids.get(name) != id(value)
            self.ids[name] = id(value)
            if self._by_reference(name, value):
                continue
            known = self.failed.get(name)
            if known is not None and known[0] == id(value):
                continue  # failed before, same object: not retried every cell
            try:
                data, ids, ser = self.dumps(value)
            except pickling.Unsaveable as exc:
                self._fail(name, value, str(exc), new_failures)
                continue
            except Exception as exc:
                self._fail(name, value, f"cannot be pickled: {exc}", new_failures)
                continue
            self.failed.pop(name, None)
            pickled[name], sers[name] = data, ser
            self.idsets[name] = ids
            entry = self.entries.get(name)
            self.entries[name] = {
                "defined_in": defined if rebound or entry is None else entry["defined_in"],
            }
        blobs = self._group_blobs(current, pickled, sers, new_failures, defined)
        self._enforce_pad_cap(blobs, new_failures)
        number = number or self.cells  # a cell without a number: counted here
        manifest = self.manifest(cell_id, number)
        body = _body(manifest)
        if body != self.last_body:  # else the current manifest says it all: HEAD stays put
            self.last_body = body  # (a revert then undoes the last cell that changed a value)
            self._write(blobs, manifest, number)
        else:
            blobs = {}
        late, self.late = self.late, []
        outcome: dict[str, Any] = {
            "wrote": len(blobs),
            "bytes": sum(len(data) for data in blobs.values()),
            "failed": _bounded(new_failures),
        }
        if late:
            outcome["late"] = late[:REPORT_REASONS]
        if blobs:  # the server scans them for secrets only it knows, once on disk
            outcome["number"] = number
            outcome["blobs"] = self._named(blobs)
        return outcome

    def _named(self, blobs: dict[str, bytes]) -> dict[str, Any]:
        """The new blobs and the names each holds (the first ``NEW_BLOBS``; ``"more"``
        says there were others)."""
        names: dict[str, list[str]] = {}
        for name, entry in self.entries.items():
            if entry["blob"] in blobs:
                names.setdefault(entry["blob"], []).append(name[:NAME_CAP])
        listed = {blob: held[:REPORT_REASONS] for blob, held in list(names.items())[:NEW_BLOBS]}
        return {"new": listed, "more": len(names) > len(listed)}

    def _by_reference(self, name: str, value: object) -> bool:
        """Record a module, or a function or class importable by name, as an import."""
        self.modules.pop(name, None)
        self.from_imports.pop(name, None)
        if isinstance(value, types.ModuleType):
            module = getattr(value, "__name__", None)
            if isinstance(module, str) and sys.modules.get(module) is value:
                self.modules[name] = module
                self.entries.pop(name, None)
                return True
            return False
        if not isinstance(value, (type, types.FunctionType, types.BuiltinFunctionType)):
            return False
        module = getattr(value, "__module__", None)
        qualname = getattr(value, "__qualname__", None)
        if not isinstance(module, str) or not isinstance(qualname, str) or module == "__main__":
            return False
        found: Any = sys.modules.get(module)
        for part in qualname.split("."):
            found = getattr(found, part, None)
        if found is not value:
            return False
        self.from_imports[name] = f"{module}:{qualname}"
        self.entries.pop(name, None)
        return True

    def _fail(self, name: str, value: object, why: str, into: dict[str, str]) -> None:
        self.failed[name] = (id(value), why)
        self.failed_in[name] = self.number
        self.entries.pop(name, None)
        self.idsets.pop(name, None)
        into[name] = why

    def _group_blobs(
        self, current: dict[str, object], pickled: dict[str, bytes], sers: dict[str, str],
        failures: dict[str, str], defined: dict[str, Any],
    ) -> dict[str, bytes]:  # fmt: skip
        """The blobs to write: one per dirty value, one per aliasing group holding one."""
        blobs: dict[str, bytes] = {}
        groups = _Groups({n: ids for n, ids in self.idsets.items() if n in self.entries})
        for members in groups.members().values():
            members.sort()
            if not any(name in pickled for name in members):
                continue
            if len(members) == 1:
                name = members[0]
                data = pickled[name]
                ser = sers[name]
            else:
                group = {name: current[name] for name in members}
                try:
                    data, _ids, ser = self.dumps(group)
                except Exception as exc:
                    why = (
                        str(exc)
                        if isinstance(exc, pickling.Unsaveable)
                        else f"cannot be pickled: {exc}"
                    )
                    for name in members:
                        self._fail(name, current[name], why, failures)
                    continue
            digest = hashlib.sha256(data).hexdigest()
            blobs[digest] = data
            for name in members:
                entry = self.entries[name]
                entry.setdefault("defined_in", defined)
                entry.update(
                    blob=digest, group=members if len(members) > 1 else None, ser=ser,
                    bytes=len(data),
                )  # fmt: skip
        return blobs

    def _enforce_pad_cap(self, blobs: dict[str, bytes], failures: dict[str, str]) -> None:
        """Past the pad's cap, the largest new blobs are dropped (their names reported)."""
        sizes: dict[str, int] = {}
        for entry in self.entries.values():
            sizes[entry["blob"]] = entry["bytes"]
        total = sum(sizes.values())
        for digest in sorted(blobs, key=lambda d: -len(blobs[d])):
            if total <= self.pad_cap:
                break
            total -= len(blobs.pop(digest))
            for name in [n for n, e in self.entries.items() if e["blob"] == digest]:
                why = f"over the pad's {pickling.mb(self.pad_cap)} checkpoint cap"
                self.failed[name] = (self.ids.get(name, 0), why)
                self.entries.pop(name)
                self.idsets.pop(name, None)
                failures[name] = why

    def manifest(self, cell_id: str, number: int) -> dict[str, Any]:
        self.last_path = list(sys.path)
        base = set(self.base_path)
        return {
            "format": FORMAT,
            "generation": self.generation,
            "cell_id": cell_id,
            "number": number,
            "vars": self.entries,
            "modules": self.modules,
            "from_imports": self.from_imports,
            "sys_path_added": [p for p in sys.path if p not in base and isinstance(p, str)],
            "failed": {name: why for name, (_, why) in self.failed.items()},
            "failed_in": {name: n for name, n in self.failed_in.items() if name in self.failed},
            "total_bytes": sum({e["blob"]: e["bytes"] for e in self.entries.values()}.values()),
        }

    # -- pickling -------------------------------------------------------------------------------
    def dumps(self, value: object) -> tuple[bytes, frozenset[int], str]:
        """``value`` pickled (cloudpickle, else dill), the ids it shares, the serializer."""
        try:
            data, ids, ser = self._dumps("cloudpickle", value)
        except pickling.Unsaveable:
            raise
        except Exception as first:
            try:
                data, ids, ser = self._dumps("dill", value)
            except pickling.Unsaveable:
                raise
            except Exception:
                raise first from None
        if pickling.MARKER in data:
            raise pickling.Unsaveable("open file handle")
        for name in self.secret_env:
            secret = os.environ.get(name, "")
            if len(secret) >= SECRET_MIN and secret.encode("utf-8", "surrogatepass") in data:
                raise pickling.Unsaveable(f"holds a secret: the value of ${name}")
        if self.key_shapes is not None:
            shape = pickling.key_shape_in(self.key_shapes, data)
            if shape is not None:
                raise pickling.Unsaveable(
                    f"holds what looks like a secret (a key of the shape {shape}…)"
                )
        return data, ids, ser

    def _dumps(self, library: str, value: object) -> tuple[bytes, frozenset[int], str]:
        pickler_class, version = self._serializer(library)
        buffer = pickling.Capped(self.var_cap)
        pickler = pickler_class(buffer, protocol=5)
        pickler.dump(value)
        data = b"".join(buffer.parts)
        if pickling.MARKER in data:
            raise pickling.Unsaveable("open file handle")
        memo = pickler.memo
        objects = memo.copy().values() if hasattr(memo, "copy") else memo.values()
        ids = frozenset(id(obj) for _, obj in objects if not isinstance(obj, NOT_SHARED))
        return data, ids, f"{library} {version}"

    def _serializer(self, library: str) -> tuple[Any, str]:
        found = self.serializers.get(library)
        if found is None:
            module = __import__(library)
            found = (pickling.pickler_class(module.Pickler, self.namespace), module.__version__)
            self.serializers[library] = found
        return found

    # -- writing --------------------------------------------------------------------------------
    def _write(self, blobs: dict[str, bytes], manifest: dict[str, Any], number: int) -> None:
        """Hand the files to the writer thread: the cell does not wait for the disk, unless
        more than ``PENDING_BYTES`` are still on their way to it (cells faster than fsync)."""
        data = json.dumps(manifest, ensure_ascii=False).encode("utf-8", "backslashreplace")
        size = len(data) + sum(len(blob) for blob in blobs.values())
        if self.writer is None:
            import threading

            self.writer = threading.Condition()
            threading.Thread(target=self._writing, name="checkpoint", daemon=True).start()
        with self.writer:
            while self.pending and self.pending_bytes + size > PENDING_BYTES:
                self.writer.wait()
            self.pending.append((blobs, data, number, size))
            self.pending_bytes += size
            self.writer.notify_all()

    def wait(self) -> None:
        """Until every checkpoint handed to the writer is on disk."""
        if self.writer is None:
            return
        with self.writer:
            while self.pending:
                self.writer.wait()

    def _writing(self) -> None:
        import signal  # loaded by now (threading, cloudpickle): costs nothing here

        block = getattr(signal, "pthread_sigmask", None)
        if block is not None:  # signals are the main thread's (an interrupt must reach it)
            block(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        writer = self.writer
        while True:
            with writer:
                while not self.pending:
                    writer.wait()
                blobs, manifest, number, _size = self.pending[0]
            self._write_files(blobs, manifest, number)
            with writer:
                self.pending_bytes -= self.pending.pop(0)[3]
                writer.notify_all()

    def _write_files(self, blobs: dict[str, bytes], manifest: bytes, number: int) -> None:
        try:
            root = _private_dir(self.directory)
            blob_dir = _private_dir(os.path.join(root, "blobs"))
            manifests = _private_dir(os.path.join(root, "manifests"))
            if not self.format_checked:  # never write into a checkpoint of a newer format
                read_format(root)
                self.format_checked = True
            if not os.path.exists(os.path.join(root, "FORMAT")):
                _atomic_write(root, "FORMAT", json.dumps({"format": FORMAT}).encode())
            for digest, data in blobs.items():
                if not os.path.exists(os.path.join(blob_dir, f"{digest}.pkl")):
                    _atomic_write(blob_dir, f"{digest}.pkl", data)
            _fsync_dir(blob_dir)
            _atomic_write(manifests, f"{number}.json", manifest)
            _fsync_dir(manifests)
            _atomic_write(root, "HEAD", str(number).encode())
            _fsync_dir(root)
            self._collect(root, blob_dir, manifests)
        except Exception as exc:  # ENOSPC, a removed directory...: told with the next cell
            self.unwritten = True  # what it held is on disk only once written again
            self.last_body = ""  # the next checkpoint is written even if it says the same
            self.late.append(
                f"variables not saved: the checkpoint after cell {number} could not be written "
                f"({exc}); the next cell saves every variable again"
            )

    def _collect(self, root: str, blob_dir: str, manifests: str) -> None:
        """Keep the current manifest and ``keep`` before it; unlink blobs none of them use."""
        numbers = sorted(
            int(name[:-5]) for name in os.listdir(manifests)
            if name.endswith(".json") and name[:-5].isdigit()
        )  # fmt: skip
        kept, dropped = numbers[-(self.keep + 1) :], numbers[: -(self.keep + 1)]
        for old in dropped:
            os.unlink(os.path.join(manifests, f"{old}.json"))
        used: set[str] = set()
        for number in kept:
            try:
                entries = json.loads(_read(os.path.join(manifests, f"{number}.json")))["vars"]
                used.update(str(entry.get("blob")) for entry in entries.values())
            except (OSError, ValueError, LookupError, TypeError, AttributeError):
                continue  # a manifest the pad damaged keeps no blob
        for name in os.listdir(blob_dir):
            if name.endswith(".pkl") and name[:-4] not in used:
                os.unlink(os.path.join(blob_dir, name))

    # -- restore -------------------------------------------------------------------------------
    def restore(self) -> dict[str, Any]:
        """Load the current manifest into the namespace: imports first, then each blob on
        its own (one failure costs its names). The report for the server."""
        read_format(self.directory)
        number = int(_read(os.path.join(self.directory, "HEAD"), 64).strip())
        manifest = json.loads(_read(os.path.join(self.directory, "manifests", f"{number}.json")))
        if manifest.get("format", FORMAT) > FORMAT:
            read_format(self.directory)
        report: list[dict[str, Any]] = []
        for entry in manifest.get("sys_path_added", []):
            if isinstance(entry, str) and entry not in sys.path:
                sys.path.append(entry)
        added = self.workspace and self.workspace not in sys.path
        if added:
            sys.path.append(self.workspace)  # appended: a types.py there shadows nothing
        try:
            self._replay_imports(manifest, report)
            self._load_blobs(manifest, report)
        finally:
            if added and self.workspace in sys.path:
                sys.path.remove(self.workspace)
        for name, why in manifest.get("failed", {}).items():
            if name not in self.namespace:
                cell = manifest.get("failed_in", {}).get(name)
                report.append({"name": name, "ok": False, "why": f"never saved: {why}",
                               "number": cell})  # fmt: skip
        self.last_path = list(sys.path)
        self.number, self.cell_id = number, str(manifest.get("cell_id") or "")
        self.last_body = _body(manifest)
        return {"number": number, "vars": _bounded_report(report)}

    def _replay_imports(self, manifest: dict[str, Any], report: list[dict[str, Any]]) -> None:
        import importlib

        for alias, module in manifest.get("modules", {}).items():
            try:
                self.namespace[alias] = value = importlib.import_module(module)
            except BaseException as exc:
                report.append({"name": alias, "ok": False, "why": f"import {module}: {exc!r}"})
                continue
            self.ids[alias] = id(value)
            self.modules[alias] = module
            report.append({"name": alias, "ok": True, "import": module})
        for name, where in manifest.get("from_imports", {}).items():
            module, _, qualname = str(where).partition(":")
            try:
                value = importlib.import_module(module)
                for part in qualname.split("."):
                    value = getattr(value, part)
            except BaseException as exc:
                report.append({"name": name, "ok": False, "why": f"from {module}: {exc!r}"})
                continue
            self.namespace[name] = value
            self.ids[name] = id(value)
            self.from_imports[name] = where
            report.append({"name": name, "ok": True, "import": where})

    def _load_blobs(self, manifest: dict[str, Any], report: list[dict[str, Any]]) -> None:
        import pickle

        by_blob: dict[str, list[str]] = {}
        for name, entry in manifest.get("vars", {}).items():
            by_blob.setdefault(str(entry.get("blob")), []).append(name)
        for digest, names in by_blob.items():
            entries = {name: manifest["vars"][name] for name in names}
            try:
                data = _read(os.path.join(self.directory, "blobs", f"{digest}.pkl"))
                if hashlib.sha256(data).hexdigest() != digest:
                    raise ValueError("the blob is damaged (its hash does not match)")
                if pickling.MARKER in data:
                    raise ValueError("it holds a file handle")
            except FileNotFoundError:
                for name in names:
                    cell = entries[name].get("defined_in") or {}
                    why = "its saved value is gone (it held a secret, or was deleted)"
                    report.append(
                        {"name": name, "ok": False, "why": why, "number": cell.get("number")}
                    )
                continue
            except BaseException as exc:
                self._not_loaded(names, entries, exc, report)
                continue
            # One blob, one load per group, and per name outside a group: two names whose
            # equal values pickle to the same bytes (x = 3, y = 3) share a blob, not an object.
            grouped = [name for name in names if entries[name].get("group")]
            loads = ([grouped] if grouped else []) + [[n] for n in names if n not in grouped]
            for members in loads:
                try:
                    value = pickle.loads(data)
                    loaded = value if members is grouped else {members[0]: value}
                    if not isinstance(loaded, dict) or not all(n in loaded for n in members):
                        raise ValueError("the group's blob does not hold its names")
                except BaseException as exc:
                    self._not_loaded(members, entries, exc, report)
                    continue
                idsets = frozenset({-int(digest[:15], 16) - 1})  # the group stays one
                for name in members:
                    self.namespace[name] = loaded[name]
                    self.ids[name] = id(loaded[name])
                    self.entries[name] = entries[name]
                    self.idsets[name] = idsets if members is grouped else frozenset()
                    report.append({"name": name, "ok": True})

    @staticmethod
    def _not_loaded(
        names: list[str], entries: dict[str, Any], exc: BaseException, report: list[Any]
    ) -> None:
        for name in names:
            cell = entries[name].get("defined_in") or {}
            why = f"{type(exc).__name__}: {exc}"
            report.append({"name": name, "ok": False, "why": why, "number": cell.get("number")})


def _body(manifest: dict[str, Any]) -> str:
    """What a manifest says of the variables (not which cell, nor which kernel, wrote it),
    comparable."""
    skip = ("cell_id", "number", "generation")
    what = {key: value for key, value in manifest.items() if key not in skip}
    return json.dumps(what, sort_keys=True, default=str)


def _bounded(failures: dict[str, str]) -> dict[str, str]:
    out = {}
    for name, why in list(failures.items())[:REPORT_REASONS]:
        out[name[:NAME_CAP]] = why[:REASON_CAP]
    return out


def _bounded_report(report: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    reasons = 0
    for item in report[:REPORT_NAMES]:
        item = dict(item)
        item["name"] = str(item["name"])[:NAME_CAP]
        if "why" in item:
            reasons += 1
            item["why"] = str(item["why"])[:REASON_CAP] if reasons <= REPORT_REASONS else ""
        out.append(item)
    return out
