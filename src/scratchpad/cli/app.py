"""CLI commands. Pad commands, ``chat`` and ``demo`` use pads on the pad server
(``cli.background`` finds it or starts one), so variables persist between two commands.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from scratchpad.cli import connect as _connect  # noqa: F401 (adds vault connect / test)
from scratchpad.cli import images
from scratchpad.cli.agent import agent_app
from scratchpad.cli.commands import CONTEXT_SETTINGS, Command, Group, checked
from scratchpad.cli.files import files_app
from scratchpad.cli.obs import obs_app
from scratchpad.cli.output import LiveCell, console, err_console, fail, print_json, print_text
from scratchpad.cli.placement import CpusOpt, GpusOpt, MemoryOpt, ResourceOpt, asked_resources
from scratchpad.cli.server_cmd import server_app
from scratchpad.cli.vault import vault_app
from scratchpad.config import Settings
from scratchpad.errors import (
    InstallError,
    InvalidInputError,
    PadError,
    PadNotFoundError,
    ScratchpadError,
)
from scratchpad.runtime.base import check_cell_id
from scratchpad.runtime.cell import Cell, StreamItem, new_cell_id
from scratchpad.runtime.limits import mib
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.runtime.padinfo import last_active
from scratchpad.runtime.remote import RemoteRuntime
from scratchpad.runtime.timeouts import check_estimate, check_timeout, name_parameters

app = typer.Typer(
    name="scratchpad",
    cls=Group,
    context_settings=CONTEXT_SETTINGS,
    help="Scratchpad: persistent Python pads for LLM agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
T = TypeVar("T")
app.add_typer(obs_app, name="obs")
app.add_typer(server_app, name="server")
app.add_typer(agent_app, name="agent")
app.add_typer(vault_app, name="vault")
app.add_typer(files_app, name="files")

PadArg = Annotated[str, typer.Argument(help="Pad name, e.g. 'main'.")]
FLAGS = {"timeout": "--timeout", "estimate": "--estimate"}  # a stopped cell's advice names them


def show_version(wanted: bool) -> None:
    if wanted:
        from scratchpad import __version__

        console.print(f"scratchpad {__version__}", markup=False)
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=show_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    pass


def bridge(job: Coroutine[Any, Any, T]) -> T:
    """The CLI's one sync→async bridge: run ``job``, report errors cleanly."""
    try:
        return asyncio.run(job)
    except ScratchpadError as exc:
        fail(str(exc))
        raise typer.Exit(2) from None
    except (KeyboardInterrupt, asyncio.CancelledError):
        fail("interrupted")
        raise typer.Exit(130) from None


def run(job: Callable[[ScratchpadManager], Awaitable[T]]) -> T:
    """Run ``job`` with a manager whose pads live on the pad server, so they share state with
    ``exec`` and the rest; they keep running afterwards."""

    async def runner() -> T:
        manager = ScratchpadManager(settings=await _on_server_settings())
        try:
            return await job(manager)
        finally:
            await manager.detach_all()

    return bridge(runner())


def on_server(
    pad: str | None,
    job: Callable[[RemoteRuntime], Awaitable[T]],
    resources: dict[str, object] | None = None,
) -> T:
    """Run ``job`` on ``pad`` of the pad server; the pad keeps running afterwards. With
    ``resources``, the pad is started first, asking its server to place it by them."""

    async def runner() -> T:
        settings = await _on_server_settings()
        url, key = settings.remote_url or "", settings.remote_api_key or ""
        runtime = RemoteRuntime("main" if pad is None else pad, url=url, api_key=key)
        try:
            if resources is not None:
                runtime.resources = resources
                await runtime.start()
            return await job(runtime)
        finally:
            await runtime.detach()

    return bridge(runner())


async def _on_server_settings() -> Settings:
    """Settings that point at the pad server (found or started in the background)."""
    from scratchpad.cli.background import endpoint

    settings = Settings.load()
    target = await asyncio.to_thread(endpoint, settings)
    update = {"backend": "remote", "remote_url": target.url, "remote_api_key": target.api_key}
    return settings.model_copy(update=update)


NO_CODE = "no code given: {why}; pass CODE, --file FILE, or pipe code into '-'"


def checked_id(value: str | None) -> str | None:
    """An ``--id`` option's callback: a cell id as the core allows it, else a usage error."""
    try:
        return check_cell_id(value)
    except InvalidInputError as exc:
        raise typer.BadParameter(str(exc)) from None


def read_code(code: str | None, file: Path | None) -> str:
    """The code to run, from the argument, the file, or standard input; empty code (an empty
    argument, file or standard input) is a usage error, not an empty cell."""
    if file is not None and code is not None:
        fail("give the code as an argument or with --file, not both")
        raise typer.Exit(2)
    if file is not None:
        source, why = read_file(file), f"{file} is empty"
    elif code is None and sys.stdin.isatty():
        source, why = "", "no CODE argument and standard input is a terminal"
    elif code is None or code == "-":
        source, why = decode(sys.stdin.buffer.read(), "standard input"), "standard input was empty"
    else:
        source, why = code, "the CODE argument is empty"
    if not source.strip():
        fail(NO_CODE.format(why=why))
        raise typer.Exit(2)
    return source


def read_file(file: Path) -> str:
    """The text of a code file; a file that cannot be read, or is not UTF-8, is a usage error."""
    try:
        data = file.read_bytes()
    except OSError as exc:
        fail(f"cannot read {file}: {exc.strerror}; give a readable file of Python code")
        raise typer.Exit(2) from None
    return decode(data, str(file))


def decode(data: bytes, what: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        fail(
            f"{what} is not UTF-8 text (byte {data[exc.start]:#04x} at offset {exc.start}); "
            "give the code as UTF-8"
        )
        raise typer.Exit(2) from None


@app.command("exec", cls=Command)
def exec_(
    pad: PadArg,
    code: Annotated[str | None, typer.Argument(help="Python code, or '-' for stdin.")] = None,
    file: Annotated[Path | None, typer.Option("--file", "-f", help="Run this file.")] = None,
    description: Annotated[
        str, typer.Option("--description", "-d", metavar="TEXT", help="What the cell does.")
    ] = "",
    estimate: Annotated[
        float,
        typer.Option(
            callback=checked(check_estimate),
            metavar="SECONDS",
            show_default=False,
            help="How long it should take (sets timeouts).",
        ),
    ] = 0.0,
    timeout: Annotated[
        float | None,
        typer.Option(
            callback=checked(check_timeout),
            metavar="SECONDS",
            show_default=False,
            help="A hard time limit for it.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the cell as JSON.")] = False,
    id_: Annotated[
        str | None,
        typer.Option(
            "--id",
            callback=checked_id,
            metavar="ID",
            help="The cell's id (1-64 letters, digits, '_', '-'), so 'scratchpad cancel PAD "
            "--id ID' can stop it; a repeat gives the cell with that id, it does not run again.",
        ),
    ] = None,
    save_images: Annotated[
        Path | None,
        typer.Option(
            "--save-images",
            metavar="DIR",
            help="Write the cell's images (PNG, JPEG, SVG) into DIR and print their paths.",
        ),
    ] = None,
    detach: Annotated[
        bool,
        typer.Option(
            "--detach",
            help="Submit the cell, print its id and exit at once; it runs on ('scratchpad "
            "attach PAD ID' follows it, 'scratchpad cells PAD' lists it).",
        ),
    ] = False,
    cpus: CpusOpt = None,
    gpus: GpusOpt = None,
    memory: MemoryOpt = None,
    resource: ResourceOpt = None,
) -> None:
    """Run code in a pad (created on first use), streaming its output; Ctrl-C cancels it."""
    source = read_code(code, file)
    resources = asked_resources(cpus, gpus, memory, resource)
    if detach:
        from scratchpad.cli.cells import exec_detached

        exec_detached(
            pad, source, description=description, estimate=estimate, timeout=timeout,
            cell_id=id_, as_json=as_json, save_images=save_images, resources=resources,
        )  # fmt: skip
        return
    if save_images is not None:
        ready_directory(save_images, "--save-images")
    cell_id = id_ or new_cell_id()  # Ctrl-C cancels this cell, never another client's

    async def job(runtime: RemoteRuntime) -> bool:
        live = LiveCell()
        async with CancelOnInterrupt(runtime, cell_id):
            items = runtime.execute_streaming(
                source,
                description=description,
                estimated_seconds=estimate,
                timeout_s=timeout,
                cell_id=cell_id,
            )
            cell = await last_cell(items, None if as_json else live.event)
        ok = end_cell(cell, live, as_json)
        if save_images is not None:
            for path in await asyncio.to_thread(images.save_images, cell, save_images):
                print_text(f"wrote {path}", err=as_json)  # stdout stays one JSON document
        return ok

    if not on_server(pad, job, resources):
        raise typer.Exit(1)


def end_cell(cell: Cell, live: LiveCell, as_json: bool) -> bool:
    """Print a cell that ended as ``exec`` does (what was not streamed, its result and
    status; or the whole cell as JSON); whether it ended ok."""
    cell.error = cell.error and name_parameters(cell.error, FLAGS)
    if as_json:
        print_json(cell.to_dict())
    else:
        live.end(cell)
    return cell.ok


async def last_cell(
    items: AsyncGenerator[StreamItem, None], on_event: Callable[[StreamItem], None] | None
) -> Cell:
    """The cell that ends ``items``, passing the events before it to ``on_event``. The stream
    is closed whatever happens, so a reader that went away (``| head``) ends the request
    cleanly: the server interrupts the cell, its state is kept."""
    async with contextlib.aclosing(items):
        async for item in items:
            if isinstance(item, Cell):
                return item
            if on_event is not None:
                on_event(item)
    raise PadError("the pad server ended the stream without the cell; run it again")


class CancelOnInterrupt:
    """First Ctrl-C cancels cell ``cell_id`` (queued: it never runs; running: interrupted,
    its output so far is kept); a second one stops waiting for it."""

    def __init__(self, runtime: RemoteRuntime, cell_id: str) -> None:
        self._runtime = runtime
        self._cell_id = cell_id
        self._loop = asyncio.get_running_loop()
        self._main = asyncio.current_task()
        self._cancelling: asyncio.Task[bool] | None = None

    async def __aenter__(self) -> None:
        self._loop.add_signal_handler(signal.SIGINT, self._interrupted)

    async def __aexit__(self, *exc: object) -> None:
        self._loop.remove_signal_handler(signal.SIGINT)
        if self._cancelling is not None and not self._cancelling.cancelled():
            try:
                await self._cancelling
            except ScratchpadError as error:
                fail(f"could not cancel the cell: {error}")

    def _interrupted(self) -> None:
        if self._cancelling is None:
            err_console.print("[yellow]cancelling the cell… (Ctrl-C again to stop waiting)[/]")
            self._cancelling = self._loop.create_task(self._runtime.cancel(self._cell_id))
        elif self._main is not None:
            self._main.cancel()


@app.command(cls=Command)
def view(pad: PadArg) -> None:
    """Show a pad's cells with their output (older cells compacted)."""
    print_text(on_server(pad, lambda runtime: _cells_as(runtime, "view")))


@app.command(cls=Command)
def dump(
    pad: PadArg,
    ipynb: Annotated[
        Path | None, typer.Option(metavar="FILE", help="Write a Jupyter notebook here.")
    ] = None,
) -> None:
    """Print a pad as notebook-style markdown, or export it as .ipynb."""
    if ipynb is None:
        print_text(on_server(pad, lambda runtime: _cells_as(runtime, "dump")))
        return
    check_writable(ipynb, "--ipynb")
    notebook = on_server(pad, lambda runtime: _cells_as(runtime, "ipynb"))
    try:
        ipynb.write_text(notebook, encoding="utf-8")
    except OSError as exc:
        fail(f"--ipynb: cannot write {ipynb}: {exc.strerror}; choose another path")
        raise typer.Exit(2) from None
    console.print(f"wrote {ipynb}", markup=False)


def ready_directory(path: Path, option: str) -> None:
    """``path`` as a directory (made when missing), before any server is asked."""
    if path.exists() and not path.is_dir():
        fail(f"{option}: {path} is not a directory; give a directory (made when missing)")
        raise typer.Exit(2)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        fail(f"{option}: cannot make {path}: {exc.strerror}; choose another directory")
        raise typer.Exit(2) from None


def check_writable(path: Path, option: str) -> None:
    """Refuse at once (before any server is asked) a file path that cannot be written."""
    if path.is_dir():
        fail(f"{option}: {path} is a directory; give a file name, e.g. {path / 'notebook.ipynb'}")
    elif path.parent.exists() and not path.parent.is_dir():
        fail(f"{option}: {path.parent} is not a directory; choose another path")
    elif not path.parent.is_dir():
        fail(f"{option}: there is no directory {path.parent}; create it or choose another path")
    else:
        return
    raise typer.Exit(2)


async def _cells_as(runtime: RemoteRuntime, kind: str) -> str:
    await runtime.load_cells()
    if kind == "view":
        return runtime.view()
    if kind == "dump":
        return runtime.dump()
    return json.dumps(runtime.to_ipynb(), indent=1)


@app.command("ls", cls=Command)
def ls(
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print the pads as JSON: [{name, status, cells, queued, memory_bytes, "
            "last_activity}] (memory_bytes: null for a stopped pad; last_activity: epoch "
            "seconds, null before any cell).",
        ),
    ] = False,
) -> None:
    """List the pads: status, cells, memory (of a running kernel) and last activity."""
    pads = on_server(None, lambda runtime: runtime.server_pads())
    if as_json:
        keys = ("name", "status", "cells", "queued", "memory_bytes", "last_activity")
        print_json([{key: pad.get(key) for key in keys} for pad in pads])
        return
    if not pads:
        console.print("no pads yet; create one with: scratchpad exec main 'print(1)'")
    now = time.time()
    for pad in pads:
        waiting = f", {pad['queued']} queued" if pad.get("queued") else ""
        memory = pad.get("memory_bytes")
        active = last_active(pad.get("last_activity"), now)
        print_text(
            f"{pad['name']}\t{pad['status']}{waiting}\t{pad['cells']} cells\t"
            f"{'-' if memory is None else mib(memory)}\t{active}"
        )


@app.command(cls=Command)
def rm(pad: PadArg) -> None:
    """Delete a pad: its environment, packages and history."""
    on_server(pad, _remove)
    print_text(f"removed pad {pad}")


async def _remove(runtime: RemoteRuntime) -> None:
    if runtime.name not in {str(known.get("name")) for known in await runtime.server_pads()}:
        raise PadNotFoundError(f"no pad named {runtime.name!r}; there is nothing to remove")
    await runtime.cleanup()


@app.command(cls=Command)
def reset(pad: PadArg) -> None:
    """Clear a pad's cells and state; installed packages stay."""
    on_server(pad, lambda runtime: runtime.reset())
    print_text(f"reset pad {pad}")


@app.command(cls=Command)
def revert(pad: PadArg) -> None:
    """Put a pad's variables back as they were before its last cell that changed them (the
    cell stays in its history); again, one more step back."""
    back = on_server(pad, lambda runtime: runtime.revert())
    print_text(f"reverted pad {pad}: its variables are as they were after cell {back}")


@app.command(cls=Command)
def fork(
    source: Annotated[str, typer.Argument(help="The pad to copy.")],
    target: Annotated[str, typer.Argument(help="The new pad's name (it must not exist).")],
) -> None:
    """Copy a pad into a new one: its packages, variables and cells (not its vault grants);
    the new pad starts asleep, the source is left as it was."""
    info = run(lambda manager: manager.fork(source, target))
    print_text(f"forked pad {source} into {info.name} ({info.cells} cells, {info.status})")


@app.command(cls=Command)
def cancel(
    pad: PadArg,
    id_: Annotated[
        str | None,
        typer.Option(
            "--id",
            callback=checked_id,
            metavar="ID",
            help="Cancel this cell (given with 'exec --id'): queued, it never runs; running, "
            "it is interrupted. Without it: the running cell.",
        ),
    ] = None,
) -> None:
    """Cancel the cell running in a pad, or one cell by its id (its variables stay)."""
    if on_server(pad, lambda runtime: runtime.cancel(id_)):
        which = f"cell {id_}" if id_ else "the running cell"
        print_text(f"cancelled {which} of {pad}")
    elif id_:
        print_text(f"no cell {id_} was queued or running in {pad}; if it comes, it will not run")
    else:
        print_text(f"no cell was running in {pad}")


@app.command(cls=Command)
def install(
    pad: PadArg,
    packages: Annotated[
        list[str] | None, typer.Argument(help="Package specs, e.g. requests 'six>=1'.")
    ] = None,
    requirements: Annotated[
        list[Path] | None,
        typer.Option(
            "--requirement", "-r", metavar="FILE", help="Install the specs of this file too."
        ),
    ] = None,
) -> None:
    """Install packages into a pad's environment (exit 1 when the installer fails)."""
    from scratchpad.cli.requirements import read_requirements
    from scratchpad.runtime.venv import validate_specs

    specs = list(packages or [])
    if not specs and not requirements:
        fail("no packages given: pass PACKAGE... or -r requirements.txt")
        raise typer.Exit(2)
    try:
        for path in requirements or []:
            specs += read_requirements(path)
        specs = validate_specs(specs)  # a spec no pad takes is a usage error, asked of no server
    except ScratchpadError as exc:
        fail(str(exc))
        raise typer.Exit(2) from None

    async def job(runtime: RemoteRuntime) -> tuple[bool, str]:
        try:
            return True, await runtime.install_packages(specs) or "nothing to do"
        except InstallError as exc:  # the installer's own words: what failed and why
            return False, str(exc)

    ok, output = on_server(pad, job)
    print_text(output, err=not ok)
    if not ok:
        raise typer.Exit(1)


@app.command(cls=Command)
def chat(
    model: Annotated[
        str | None,
        typer.Option(
            metavar="PROVIDER:MODEL",
            help="The model (else SCRATCHPAD_MODEL), or scripted:FILE: a JSON script of turns.",
        ),
    ] = None,
    pad: Annotated[str, typer.Option(help="The pad the model works in.")] = "main",
) -> None:
    """Chat with a model that runs code in a pad (Ctrl-C stops a running cell).

    Exits 1 when a turn failed.
    """
    from scratchpad.cli.chat import run_chat

    if not run(lambda manager: run_chat(manager, model, pad)):
        raise typer.Exit(1)


def check_port(value: int) -> int:
    if not 0 <= value <= 65535:
        raise typer.BadParameter(f"{value} is not a port: use 0 to 65535 (0 picks a free one)")
    return value


@app.command(cls=Command)
def serve(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[
        int, typer.Option(callback=check_port, help="Port to listen on, 0-65535 (0: any free).")
    ] = 8765,
    workspace: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR",
            exists=True,
            file_okay=False,
            help="Bind a workspace: every pad works in DIR, the home is DIR/.scratchpad "
            "(default: each pad in a directory of its own under the home).",
        ),
    ] = None,
) -> None:
    """Serve pads over HTTP (the remote-backend protocol and /v1 read endpoints)."""
    from scratchpad.server.serve import serve as run_server

    try:
        asyncio.run(run_server(host, port, workspace=workspace))
    except ScratchpadError as exc:
        fail(str(exc))
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        pass


@app.command(cls=Command)
def login(
    open_: Annotated[bool, typer.Option("--open", help="Open the link in a browser.")] = False,
    next_: Annotated[str, typer.Option("--next", help="The page to open, e.g. /.")] = "/",
) -> None:
    """Print a link that logs a browser in to the web UI (works once, for 10 minutes)."""
    from scratchpad.cli.login import login_url, open_in_browser

    try:
        url = login_url(Settings.load(), next_)
    except ScratchpadError as exc:
        fail(str(exc))
        raise typer.Exit(2) from None
    console.print(url, markup=False)
    if open_ and not open_in_browser(url):
        fail("no browser could be started here: open the link above yourself")
        raise typer.Exit(1)


@app.command("mcp", cls=Command)
def mcp_stdio() -> None:
    """Serve pads to an MCP client over stdin/stdout (e.g. Claude Desktop).

    The pads are the pad server's, shared with exec and the rest.
    """
    from scratchpad.observations.store import ObservationStore
    from scratchpad.scrub import scrub_logs
    from scratchpad.server.mcp_server import serve_stdio

    scrub_logs()

    async def job(manager: ScratchpadManager) -> None:
        with ObservationStore(settings=manager.settings) as store:
            await serve_stdio(manager, store)

    run(job)


@app.command(cls=Command)
def demo() -> None:
    """A short tour: a pad keeps state, reports an error, draws a plot."""
    from scratchpad.cli.demo import run_demo

    run(run_demo)


from scratchpad.cli import cells as _cells  # noqa: E402, F401 (adds cells, attach: they use the above)
