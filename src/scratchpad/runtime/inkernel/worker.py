"""The kernel: one long-lived process per pad that runs its cells.

Standard library only, started by file path (``python worker.py CTRL_IN CTRL_OUT CONFIG``) so
nothing of the scratchpad package is imported at boot. Control messages travel as frames on the
two pipes given on the command line (see protocol.py); fd 1 and fd 2 are plain pipes the parent
reads itself, so whatever user code prints can never desync the protocol.

While a cell runs, a thread of its own sends a heartbeat every ``heartbeat_s``: a quiet cell is
alive as long as they come; none means the process is stopped or C code holds the GIL. The
kernel is started from the host's interpreter with ``python -I -S`` and confines itself first
(``confine.launch``: namespaces, identity, limits, Landlock; see confine.py); only then does it
become its pad's interpreter (``sys.executable`` in the venv, the venv's ``site`` with the
``.pth`` files the pad may have written), so nothing of the pad runs unconfined.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing itself costs milliseconds at boot
if TYPE_CHECKING:
    from typing import Any, ClassVar

_HERE = os.path.dirname(os.path.abspath(__file__))
if sys.path and os.path.abspath(sys.path[0] or ".") == _HERE:
    sys.path.pop(0)
sys.path.insert(0, _HERE)
if TYPE_CHECKING:
    import signal as _signal

    from scratchpad.runtime.inkernel import confine, protocol, sandbox
else:
    import _signal  # the signal module would import enum: milliseconds at boot

    import confine  # the sibling files, renamed below so user code never sees them
    import protocol
    import sandbox

for _name in ("confine", "namespaces", "protocol", "sandbox"):
    sys.modules[f"_scratchpad_{_name}"] = sys.modules.pop(_name)
sys.path[0] = ""  # like a notebook: the working directory comes first

import _thread  # noqa: E402
import ast  # noqa: E402
import builtins  # noqa: E402
import faulthandler  # noqa: E402
import io  # noqa: E402
import time  # noqa: E402
import types  # noqa: E402

PRIVATE_MODULES = {
    "_scratchpad_helpers": "helpers.py",
    "_scratchpad_mpl_backend": "mpl_backend.py",
    "_scratchpad_llm_bridge": "llm_bridge.py",
    "_scratchpad_cell_logs": "cell_logs.py",
    "_scratchpad_checkpoint": "checkpoint.py",
    "_scratchpad_pickling": "pickling.py",
}
CHECKPOINT_LIBRARIES = (
    "cloudpickle",
    "dill",
)  # found on the host's site dir when the pad lacks them
BRIDGE_FUNCTIONS = ("get_llm", "agentic_loop", "web_search")
CO_COROUTINE = 0x80
RESULT_CAP = 100_000
ERROR_CAP = 100_000  # characters of a cell's traceback
# Jupyter's rich-repr methods: a result whose type has one gets a "result" frame of its forms.
RICH_REPRS = (
    "_repr_mimebundle_", "_repr_html_", "_repr_markdown_", "_repr_latex_", "_repr_json_",
    "_repr_svg_", "_repr_png_", "_repr_jpeg_",
)  # fmt: skip
MESSAGE_CAP = 4_000  # characters of one progress() message
DEFAULT_HEARTBEAT_S = 2.0
ASYNC_SIGNALS = {
    getattr(_signal, name)
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGALRM", "SIGUSR1", "SIGUSR2")
    if hasattr(_signal, name)
}


class _PrivateFinder:
    """Finds the kernel's own lazily loaded modules by file path, under private names."""

    @staticmethod
    def find_spec(name: str, path: object = None, target: object = None) -> Any:
        filename = PRIVATE_MODULES.get(name)
        if filename is None:
            return None
        from importlib.util import spec_from_file_location

        return spec_from_file_location(name, os.path.join(_HERE, filename))


class _LibraryFinder:
    """Finds the checkpoint serializers (``CHECKPOINT_LIBRARIES``, top-level names only) in
    the host's site directories the parent named; last on ``sys.meta_path``, so a pad that
    installed its own keeps it. Nothing else of those directories is importable."""

    places: ClassVar[dict[str, str]] = {}

    @classmethod
    def find_spec(cls, name: str, path: object = None, target: object = None) -> Any:
        place = cls.places.get(name)
        if place is None:
            return None
        from importlib.machinery import PathFinder

        return PathFinder.find_spec(name, [place])


def _lazy_bridge(name: str) -> Any:
    """A stand-in that loads the LLM bridge (and the LLM SDKs) only when first called."""

    def call(*args: Any, **kwargs: Any) -> Any:
        import _scratchpad_llm_bridge

        return getattr(_scratchpad_llm_bridge, name)(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    return call


class _LoggingHook:
    """Finds ``logging`` when something first imports it, so that once loaded its records go
    to the running cell's logs (see cell_logs.py). Importing logging at boot would cost every
    kernel start milliseconds."""

    @staticmethod
    def find_spec(name: str, path: object = None, target: object = None) -> Any:
        if name != "logging" or _LoggingHook not in sys.meta_path:
            return None
        sys.meta_path.remove(_LoggingHook)  # once: from now on logging is found as usual
        import _scratchpad_cell_logs

        return _scratchpad_cell_logs.routed_spec(name, path, target)


def watch_logging() -> None:
    """Route ``logging`` to the cells' logs: now if it is loaded, else when it is imported."""
    if "logging" in sys.modules:
        import _scratchpad_cell_logs

        _scratchpad_cell_logs.route_logging(sys.modules["logging"])
    else:
        sys.meta_path.insert(0, _LoggingHook)


def _closed_stdin_input(prompt: object = "") -> str:
    raise EOFError(
        "input() is not available in a pad: its stdin is closed. "
        "Put the value in the code, or read it from a file or an environment variable."
    )


class Kernel:
    """Reads execute requests, runs them in one persistent namespace, answers with frames."""

    def __init__(self, ctrl_in: int, ctrl_out: int) -> None:
        self.ctrl_in = ctrl_in
        self.ctrl_out = ctrl_out
        self.send_lock = _thread.allocate_lock()
        self.main_thread = _thread.get_ident()
        self.main_sending = False
        self.deferred_interrupt = False
        self.busy = False  # from an execute request until its reply: heartbeats flow
        self.in_cell = False
        self.interrupted = False
        self.count = 0
        self.cell_id = ""  # the cell run last: its frames carry its id
        self.loop: Any = None
        self.user_module = types.ModuleType("__main__")
        self.namespace = self.user_module.__dict__
        self.namespace.update(
            __builtins__=builtins,
            display=self.display,
            progress=self.progress,
            sample=self.sample,
        )
        for name in BRIDGE_FUNCTIONS:
            self.namespace[name] = _lazy_bridge(name)
        self.injected = list(self.namespace.values())  # never saved in a checkpoint
        self.checkpoint_config: dict[str, Any] | None = None  # from the parent (see main)
        self.checkpointer: Any = None
        self.codes: tuple[Any, ...] = ()  # the last cell's code objects

    # -- helpers exposed to cells ---------------------------------------------------------
    def send(self, message: dict[str, object]) -> None:
        """Write one frame, one the parent accepts (see protocol.encode_bounded)."""
        self.write(protocol.encode_bounded(message))

    def write(self, frame: bytes) -> None:
        """Write an encoded frame. An interrupt never cuts it short: it waits until the end."""
        in_main = _thread.get_ident() == self.main_thread
        with self.send_lock:
            if in_main:
                self.main_sending = True
            try:
                protocol.write_all(self.ctrl_out, frame)
            finally:
                if in_main:
                    self.main_sending = False
        if in_main and self.deferred_interrupt:
            self.deferred_interrupt = False
            raise KeyboardInterrupt

    def progress(self, message: object = "") -> None:
        """Report progress to the caller (long messages keep their head and tail)."""
        text = cut_text(str(message), MESSAGE_CAP)
        self.send({"type": "progress", "id": self.cell_id, "message": text, **output_marks()})

    def display(self, *objects: object) -> None:
        """Show rich output (images, HTML, ...) for each object, like Jupyter's display()."""
        import _scratchpad_helpers

        for obj in objects:
            self.show(_scratchpad_helpers.mime_bundle(obj))

    def show(self, bundle: dict[str, Any], kind: str = "display") -> None:
        """Send one mime bundle (a display, or the rich forms of a ``result``); one too big
        for a frame becomes a note saying so."""
        try:
            message = {"type": kind, "id": self.cell_id, "data": bundle, **output_marks()}
            frame = protocol.encode_bounded(message)
        except protocol.FrameTooBig as exc:
            kinds = ", ".join(sorted(str(mime) for mime in bundle))
            note = f"[a {kind} ({kinds}) was dropped: as a frame it takes {exc}]"
            message = {"type": kind, "id": self.cell_id, "data": {"text/plain": note}}
            frame = protocol.encode_bounded({**message, **output_marks()})
        self.write(frame)

    def show_result(self, value: object) -> None:
        """Send the rich forms of the cell's result (a DataFrame's text/html, ...), when its
        type has any; the helpers load only then."""
        try:
            rich = not isinstance(value, type) and any(hasattr(value, n) for n in RICH_REPRS)
        except Exception:
            return
        if not rich:
            return
        import _scratchpad_helpers

        try:
            bundle = _scratchpad_helpers.mime_bundle(value)
            bundle.pop("text/plain", None)  # the result's text travels in "done"
            if bundle:
                self.show(bundle, "result")
        except Exception:  # a broken rich repr leaves the result its text; the cell is ok
            return

    def sample(self, value: object, mode: str = "preview") -> None:
        """Print a type-aware view of a value: ``preview`` (short) or ``full`` (longer)."""
        import _scratchpad_helpers

        print(_scratchpad_helpers.sample(value, mode))

    # -- the loop -------------------------------------------------------------------------
    def on_sigint(self, signum: int, frame: object) -> None:
        if not self.in_cell:
            return  # between cells an interrupt has nothing to stop
        self.interrupted = True
        if self.main_sending:
            self.deferred_interrupt = True  # raised by send() once the frame is whole
            return
        raise KeyboardInterrupt

    def heartbeat(self, interval: float) -> None:
        """The heartbeat thread: a frame every ``interval`` seconds while a cell runs.

        It blocks the asynchronous signals first: a SIGINT it took would set Python's flag
        but leave the main thread asleep in a blocking call, so an interrupt could be lost.
        """
        block = getattr(_signal, "pthread_sigmask", None)
        if block is not None:
            block(_signal.SIG_BLOCK, ASYNC_SIGNALS)
        while True:
            time.sleep(interval)
            if self.busy:
                try:
                    self.send({"type": "heartbeat"})
                except OSError:
                    return  # the parent went away; the main loop will notice too

    def serve(self, sandboxed: str = "off") -> None:
        python = sys.version.split()[0]
        self.send({"type": "ready", "pid": os.getpid(), "python": python, "sandbox": sandboxed})
        while True:
            message = protocol.read_frame(self.ctrl_in)
            if message is None or message.get("type") == "shutdown":
                if self.checkpointer is not None:
                    self.checkpointer.wait()  # the last checkpoint on disk before the exit
                return
            kind = message.get("type")
            request = message.get("id")
            if kind == "execute":
                number = message.get("number")
                self.execute(
                    str(message.get("code", "")),
                    str(request or ""),
                    number if type(number) is int and number > 0 else 0,
                )
            elif kind == "which_installed":
                names = which_installed(message.get("names"))
                self.send({"type": "installed", "id": request, "names": names})
            elif kind == "refresh_imports":
                refresh_imports()
                self.send({"type": "ack", "id": request})
            elif kind == "set_env":
                set_environ(message.get("env"))
                self.send({"type": "ack", "id": request})
            elif kind == "restore":
                self.send({"type": "restored", "id": request, **self.restore()})
            elif kind == "checkpoint":  # a full sweep (before sleep, fork, revert), on disk
                ckpt = self.checkpoint(full=True)
                if self.checkpointer is not None:
                    self.checkpointer.wait()  # answered once on disk: the kernel may stop next
                self.send({"type": "checkpointed", "id": request, "ckpt": ckpt or {}})
            elif kind == "flush":  # every checkpoint handed to the writer on disk (a revert)
                if self.checkpointer is not None:
                    self.checkpointer.wait()
                self.send({"type": "flushed", "id": request})
            elif kind == "sync":  # the parent lost track of our frames: this one it knows
                self.send({"type": "synced", "nonce": str(message.get("nonce", ""))})

    def execute(self, code: str, cell_id: str, number: int = 0) -> None:
        self.busy = True
        self.cell_id = cell_id
        try:
            reply = self.run_cell(code, cell_id, number)
        except KeyboardInterrupt:  # landed in our own bookkeeping
            reply = {
                "type": "done",
                "id": cell_id,
                "status": "interrupted",
                "result": None,
                "error": "KeyboardInterrupt",
            }
        self.finish_cell()
        if self.checkpoint_config is not None:
            ckpt = self.checkpoint(cell_id, number)
            if ckpt:
                reply["ckpt"] = ckpt
        self.busy = False
        self.send({**reply, **output_marks()})

    # -- checkpoints (see checkpoint.py) ----------------------------------------------------
    def checkpointing(self) -> Any:
        if self.checkpointer is None and self.checkpoint_config is not None:
            import _scratchpad_checkpoint

            self.checkpointer = _scratchpad_checkpoint.Checkpointer(
                self.namespace, self.injected, self.checkpoint_config
            )
        return self.checkpointer

    def checkpoint(self, cell_id: str = "", number: int = 0, full: bool = False) -> Any:
        """Checkpoint what the cell changed; a failure is the outcome, never the cell's."""
        try:
            checkpointer = self.checkpointing()
            if checkpointer is None:
                return None
            codes, self.codes = self.codes, ()
            return checkpointer.after_cell(cell_id, number, codes, full)
        except BaseException as exc:
            return {"error": f"checkpoint failed: {type(exc).__name__}: {exc}"[:500]}

    def restore(self) -> dict[str, object]:
        """Load the pad's checkpoint into the fresh namespace: the report, or why not."""
        try:
            checkpointer = self.checkpointing()
            if checkpointer is None:
                return {"error": "checkpoints are off"}
            return dict(checkpointer.restore())
        except BaseException as exc:
            return {"error": f"{type(exc).__name__}: {exc}"[:500]}

    def run_cell(self, code: str, cell_id: str, number: int = 0) -> dict[str, object]:
        """Run one cell; its tracebacks name it ``<cell N>`` with the pad's number for it
        (without one, this kernel's count)."""
        self.count += 1
        filename = f"<cell {number or self.count}>"
        status, result, error = "ok", None, None
        try:
            self.interrupted = self.deferred_interrupt = False
            self.in_cell = True  # before "started": the parent interrupts only after it
            self.send({"type": "started", "id": cell_id})
            body, last = compile_cell(code, filename)
            self.codes = (body, last)
            if body is not None:
                self.run_code(body)
            if last is not None:
                value = self.run_code(last)
                if value is not None:
                    self.namespace["_"] = value
                    result = format_result(value)
                    self.show_result(value)
        except BaseException as exc:
            interrupted = isinstance(exc, KeyboardInterrupt) and self.interrupted
            status = "interrupted" if interrupted else "error"
            error = cut_text(format_exception(exc), ERROR_CAP)
        finally:
            self.in_cell = False
        return {"type": "done", "id": cell_id, "status": status, "result": result, "error": error}

    def run_code(self, code: types.CodeType) -> object:
        value = eval(code, self.namespace)
        if code.co_flags & CO_COROUTINE:  # top-level await
            if self.loop is None:
                import asyncio

                self.loop = asyncio.new_event_loop()
            value = self.loop.run_until_complete(value)
        return value

    def finish_cell(self) -> None:
        """Capture figures left open by the cell, then push buffered output into the pipes."""
        if "matplotlib.pyplot" in sys.modules:
            try:
                import _scratchpad_helpers

                _scratchpad_helpers.capture_figures()
            except Exception as exc:
                print(f"[scratchpad] could not capture figures: {exc!r}", file=sys.__stderr__)
        for stream in (sys.__stdout__, sys.__stderr__):
            try:
                if stream is not None:
                    stream.flush()
            except (OSError, ValueError):
                pass


def compile_cell(code: str, filename: str) -> tuple[types.CodeType | None, types.CodeType | None]:
    """Split a cell into its body and, when it ends with an expression, that expression.

    Either part is None when empty (a lone expression has no body to run).
    """
    register_source(filename, code)
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    tree = ast.parse(code, filename, "exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)  # type: ignore[attr-defined]
    body = compile(tree, filename, "exec", flags=flags, dont_inherit=True) if tree.body else None
    tail = compile(last, filename, "eval", flags=flags, dont_inherit=True) if last else None
    return body, tail


_PENDING_SOURCES: dict[str, str] = {}


def register_source(filename: str, code: str) -> None:
    """Make a cell's source visible to tracebacks and inspect (via linecache).

    Importing linecache costs milliseconds, so until something else imports it the sources
    wait in a dict and are handed over when an exception is formatted.
    """
    if "linecache" in sys.modules:
        if _PENDING_SOURCES:
            _flush_sources()
        sys.modules["linecache"].cache[filename] = (
            len(code),
            None,
            code.splitlines(True),
            filename,
        )
    else:
        _PENDING_SOURCES[filename] = code


def _flush_sources() -> None:
    import linecache

    for filename, code in _PENDING_SOURCES.items():
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    _PENDING_SOURCES.clear()


def format_result(value: object) -> str:
    """The text a notebook shows as ``Out[n]``: the repr, head and tail kept when huge."""
    try:
        text = repr(value)
    except Exception as exc:
        text = f"<repr of {type(value).__name__} failed: {exc!r}>"
    return cut_text(text, RESULT_CAP)


def cut_text(text: str, cap: int) -> str:
    """``text`` with its middle replaced by a note when it is longer than ``cap``."""
    if len(text) <= cap:
        return text
    half = cap // 2
    return f"{text[:half]}\n[... {len(text) - cap} characters omitted ...]\n{text[-half:]}"


def set_environ(changes: object) -> None:
    """Apply ``{name: value}`` to os.environ; a None value removes the variable."""
    if not isinstance(changes, dict):
        return
    for name, value in changes.items():
        if value is None:
            os.environ.pop(str(name), None)
        else:
            os.environ[str(name)] = str(value)


def format_exception(exc: BaseException) -> str:
    """The traceback of a cell's exception without the kernel's own frames (and, for a
    refusal by the sandbox, a note saying where the pad may write)."""
    import traceback

    _flush_sources()
    summary = traceback.TracebackException.from_exception(exc)
    own = {os.path.abspath(__file__), ast.__file__}  # parsing a cell is our business too
    summary.stack = traceback.StackSummary.from_list(
        [frame for frame in summary.stack if frame.filename not in own]
    )
    text = "".join(summary.format())
    return text + ipython_note(exc) + sandbox.refusal_note(exc)


def ipython_note(exc: BaseException) -> str:
    """A one-line hint when a cell fails to parse on an IPython line (``!cmd``, ``%magic``,
    ``%%magic``), which a pad does not run: it runs plain Python. "" for any other error."""
    if not isinstance(exc, SyntaxError) or not exc.text:
        return ""
    line = exc.text.strip()
    if not line.startswith(("!", "%")) or line.startswith("!="):
        return ""
    words = line.lstrip("!%").split()
    command = words[0] if words else ""
    shown = line[: len(line) - len(line.lstrip("!%"))] + command
    if command in ("pip", "uv", "conda", "mamba"):
        instead = "install packages with the install action (or subprocess.run([...]))"
    elif line.startswith("!"):
        argv = f"[{command!r}, ...]" if command else "[...]"
        instead = f"use subprocess.run({argv}, capture_output=True, text=True)"
    else:
        instead = "write it in plain Python (subprocess.run([...]) runs a command)"
    return f"Note: `{shown}` is IPython syntax, which a pad does not run: {instead}.\n"


def which_installed(names: object) -> list[str]:
    """The distribution names among ``names`` that this interpreter can already import."""
    import importlib.metadata

    found = []
    for name in names if isinstance(names, list) else []:
        try:
            importlib.metadata.distribution(str(name))
        except importlib.metadata.PackageNotFoundError:
            continue
        found.append(str(name))
    return found


def refresh_imports() -> None:
    """Make packages installed after boot importable (new dirs, new .pth files)."""
    import importlib
    import site

    for directory in site.getsitepackages([sys.prefix]):
        if os.path.isdir(directory):
            site.addsitedir(directory)
    importlib.invalidate_caches()


_REPLACED_STREAMS: list[Any] = []  # kept alive: dropping them could close fd 1 or 2


class _Counted(io.RawIOBase):
    """fd 1 or 2, counting the bytes written through it: a frame says how much of the
    cell's output came before it, so the parent keeps both in the order they were made."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self.fd = fd
        self.written = 0

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.fd

    def write(self, data: Any) -> int:
        written = os.write(self.fd, data)
        self.written += written
        return written


_COUNTED: dict[str, tuple[io.TextIOWrapper, _Counted]] = {}  # our stdout and stderr


def _line_buffered(name: str) -> None:
    """One write per line, whatever PYTHONUNBUFFERED says (it would split every print), and
    counted (see :func:`output_marks`)."""
    stream = getattr(sys, name)
    if not isinstance(stream, io.TextIOWrapper):
        return
    stream.flush()
    _REPLACED_STREAMS.append(stream)
    counted = _Counted(stream.fileno())
    replacement = io.TextIOWrapper(
        io.BufferedWriter(counted),
        encoding=stream.encoding,
        errors="backslashreplace",
        line_buffering=True,
    )
    _COUNTED[name] = (replacement, counted)
    setattr(sys, name, replacement)
    setattr(sys, f"__{name}__", replacement)


def output_marks() -> dict[str, int]:
    """How many bytes this process wrote to stdout (``out``) and stderr (``err``) so far,
    after a flush: where a frame sent now stands among the output."""
    marks = {}
    for name, key in (("stdout", "out"), ("stderr", "err")):
        if name in _COUNTED:
            stream, counted = _COUNTED[name]
            try:
                stream.flush()
            except (OSError, ValueError):
                continue
            marks[key] = counted.written
    return marks


def configure_process(config: dict[str, Any]) -> None:
    """Streams, input, fault handler, private modules: what the kernel sets once at boot."""
    for name in ("stdout", "stderr"):
        _line_buffered(name)
    builtins.input = _closed_stdin_input
    faulthandler.enable()
    sys.meta_path.append(_PrivateFinder)
    checkpoint = config.get("checkpoint")
    if isinstance(checkpoint, dict):
        libraries = checkpoint.get("libraries")
        if isinstance(libraries, dict):
            _LibraryFinder.places = {
                name: str(place)
                for name, place in libraries.items()
                if name in CHECKPOINT_LIBRARIES and isinstance(place, str)
            }
            sys.meta_path.append(_LibraryFinder)


def enter_pad(spec: object, ctrl_in: int, ctrl_out: int) -> str:
    """Confine this process (see confine.py) before any code the pad can change runs: what
    holds ("landlock", "off", "unavailable"). When a step fails, say so on the channel and
    exit: no code of the pad runs."""
    try:
        return confine.launch(spec if isinstance(spec, dict) else {}, keep=(ctrl_in, ctrl_out))
    except confine.Refused as exc:
        protocol.write_all(ctrl_out, protocol.encode({"type": "refused", "error": str(exc)}))
        os._exit(3)


def become_venv(root: object) -> None:
    """From here on this is the pad's interpreter: ``sys.executable`` in its venv (what
    ``site`` reads ``pyvenv.cfg`` beside, what subprocesses and multiprocessing start)."""
    if isinstance(root, str) and root:
        sys.executable = os.path.join(root, "bin", "python")


def load_site() -> None:
    """What ``python -S`` left out (the venv's site-packages, .pth files), once the pad is
    confined; the working directory stays first on sys.path as a relative entry."""
    if not sys.flags.no_site or "site" in sys.modules:
        return
    first = sys.path.pop(0) if sys.path and sys.path[0] == "" else None
    import site

    site.main()
    if first is not None:
        sys.path.insert(0, first)


def _after_fork_in_child(kernel: Kernel, *fds: int) -> None:
    """In a forked child (multiprocessing): let go of the channel, so the parent sees EOF,
    and never wait on a lock the (absent) heartbeat thread held at fork time."""
    kernel.send_lock = _thread.allocate_lock()
    kernel.busy = False
    for fd in fds:
        try:  # noqa: SIM105 - contextlib is not worth importing at boot
            os.close(fd)
        except OSError:
            pass


def main(argv: list[str]) -> int:
    ctrl_in, ctrl_out = int(argv[1]), int(argv[2])
    config = confine.read_json_fd(argv[3]) if len(argv) > 3 else {}
    sandboxed = enter_pad(config.get("confine"), ctrl_in, ctrl_out)
    become_venv(config.get("venv"))
    load_site()
    for fd in (ctrl_in, ctrl_out):
        os.set_inheritable(fd, False)  # children of user code must not hold the channel open
    kernel = Kernel(ctrl_in, ctrl_out)
    os.register_at_fork(after_in_child=lambda: _after_fork_in_child(kernel, ctrl_in, ctrl_out))
    sys.modules["_scratchpad_kernel"] = sys.modules[__name__]
    sys.modules["__main__"] = kernel.user_module
    global KERNEL
    KERNEL = kernel
    configure_process(config)
    if isinstance(config.get("checkpoint"), dict):
        kernel.checkpoint_config = {**config["checkpoint"], "base_path": list(sys.path)}
    watch_logging()
    _signal.signal(_signal.SIGINT, kernel.on_sigint)
    interval = float(config.get("heartbeat_s") or DEFAULT_HEARTBEAT_S)
    _thread.start_new_thread(kernel.heartbeat, (interval,))
    try:
        kernel.serve(sandboxed)
    except (BrokenPipeError, protocol.ProtocolError):
        return 1  # the parent went away or spoke garbage: nothing left to serve
    return 0


KERNEL: Kernel | None = None

if __name__ == "__main__":
    sys.exit(main(sys.argv))
