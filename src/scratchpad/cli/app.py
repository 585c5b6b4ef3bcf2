"""CLI commands. Each one builds a manager, does its job and closes every pad it started.

Until the server exists, pad commands run in this process: the pad's environment, installed
packages and cell history persist on disk between commands; variables do not.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, TypeVar

import typer

from scratchpad.cli.obs import obs_app
from scratchpad.cli.output import console, fail, show_cell_end, show_event
from scratchpad.errors import ScratchpadError
from scratchpad.runtime.manager import ScratchpadManager

app = typer.Typer(
    help="Scratchpad: persistent Python pads for LLM agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
T = TypeVar("T")
app.add_typer(obs_app, name="obs")

PadArg = Annotated[str, typer.Argument(help="Pad name, e.g. 'main'.")]


def run(job: Callable[[ScratchpadManager], Awaitable[T]]) -> T:
    """The CLI's one sync→async bridge: run ``job`` with a manager, report errors cleanly."""

    async def runner() -> T:
        async with ScratchpadManager() as manager:
            return await job(manager)

    try:
        return asyncio.run(runner())
    except ScratchpadError as exc:
        fail(str(exc))
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        fail("interrupted")
        raise typer.Exit(130) from None


def read_code(code: str | None, file: Path | None) -> str:
    if file is not None and code is not None:
        fail("give the code as an argument or with --file, not both")
        raise typer.Exit(2)
    if file is not None:
        try:
            return file.read_text(encoding="utf-8")
        except OSError as exc:
            fail(f"cannot read {file}: {exc.strerror}")
            raise typer.Exit(2) from None
    if code is None or code == "-":
        if sys.stdin.isatty() and code is None:
            fail("no code given: pass CODE, --file FILE, or '-' to read standard input")
            raise typer.Exit(2)
        return sys.stdin.read()
    return code


@app.command("exec")
def exec_(
    pad: PadArg,
    code: Annotated[str | None, typer.Argument(help="Python code, or '-' for stdin.")] = None,
    file: Annotated[Path | None, typer.Option("--file", "-f", help="Run this file.")] = None,
    description: Annotated[str, typer.Option("--description", "-d")] = "",
    estimate: Annotated[float, typer.Option(help="Estimated seconds (sets timeouts).")] = 0.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the cell as JSON.")] = False,
) -> None:
    """Run code in a pad (created on first use) and show its output."""
    source = read_code(code, file)

    async def job(manager: ScratchpadManager) -> bool:
        runtime = await manager.get_or_create(pad)
        cell = await runtime.execute(
            source,
            description=description,
            estimated_seconds=estimate,
            on_event=None if as_json else show_event,
        )
        if as_json:
            console.print_json(json.dumps(cell.to_dict()))
        else:
            show_cell_end(cell)
        return cell.ok

    if not run(job):
        raise typer.Exit(1)


@app.command()
def view(pad: PadArg) -> None:
    """Show a pad's cells with their output (older cells compacted)."""
    text = run(lambda manager: _peek(manager, pad, "view"))
    console.print(text, markup=False)


@app.command()
def dump(
    pad: PadArg,
    ipynb: Annotated[Path | None, typer.Option(help="Write a Jupyter notebook here.")] = None,
) -> None:
    """Print a pad as notebook-style markdown, or export it as .ipynb."""
    if ipynb is None:
        console.print(run(lambda manager: _peek(manager, pad, "dump")), markup=False)
        return
    notebook = run(lambda manager: _peek(manager, pad, "ipynb"))
    ipynb.write_text(notebook, encoding="utf-8")
    console.print(f"wrote {ipynb}")


async def _peek(manager: ScratchpadManager, pad: str, kind: str) -> str:
    runtime = manager.peek(pad)
    if kind == "view":
        return runtime.view()
    if kind == "dump":
        return runtime.dump()
    return json.dumps(runtime.to_ipynb(), indent=1)


@app.command("ls")
def ls() -> None:
    """List the pads that exist under the home directory."""

    async def job(manager: ScratchpadManager) -> list[str]:
        return manager.names_on_disk()

    names = run(job)
    if not names:
        console.print("no pads yet; create one with: scratchpad exec main 'print(1)'")
    for name in names:
        console.print(name, markup=False)


@app.command()
def rm(pad: PadArg) -> None:
    """Delete a pad: its environment, packages and history."""
    run(lambda manager: manager.remove(pad))
    console.print(f"removed pad {pad}", markup=False)


@app.command()
def reset(pad: PadArg) -> None:
    """Clear a pad's cells and state; installed packages stay."""

    async def job(manager: ScratchpadManager) -> None:
        await (await manager.get_or_create(pad)).reset()

    run(job)
    console.print(f"reset pad {pad}", markup=False)


@app.command()
def install(
    pad: PadArg,
    packages: Annotated[list[str], typer.Argument(help="Package specs, e.g. requests 'six>=1'.")],
) -> None:
    """Install packages into a pad's environment."""

    async def job(manager: ScratchpadManager) -> str:
        return await (await manager.get_or_create(pad)).install_packages(packages)

    console.print(run(job) or "nothing to do", markup=False)


@app.command()
def chat(
    model: Annotated[
        str | None, typer.Option(help="provider:model (else SCRATCHPAD_MODEL).")
    ] = None,
    pad: Annotated[str, typer.Option(help="The pad the model works in.")] = "main",
) -> None:
    """Chat with a model that runs code in a pad (Ctrl-C stops a running cell)."""
    from scratchpad.cli.chat import run_chat

    run(lambda manager: run_chat(manager, model, pad))


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8765,
) -> None:
    """Serve pads over HTTP (the remote-backend protocol and /v1 read endpoints)."""
    from scratchpad.server.serve import serve as run_server

    try:
        asyncio.run(run_server(host, port))
    except ScratchpadError as exc:
        fail(str(exc))
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        pass


@app.command("mcp")
def mcp_stdio() -> None:
    """Serve pads to an MCP client over standard input/output (e.g. Claude Desktop)."""
    from scratchpad.server.mcp_server import serve_stdio

    try:
        asyncio.run(serve_stdio())
    except ScratchpadError as exc:
        fail(str(exc))
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        pass


@app.command()
def demo() -> None:
    """A short tour: a pad keeps state, reports an error, draws a plot."""
    from scratchpad.cli.demo import run_demo

    run(run_demo)
