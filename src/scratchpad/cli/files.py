"""``scratchpad files``: a pad's workspace files from a terminal (ls, get, put, rm).

They go through the pad server (the remote one, or this home's, started in the background
when none runs), as the other pad commands do, so the server's path rules apply: nothing
outside the workspace, nothing in the Scratchpad home. Downloads and uploads stream; a
download lands atomically (a failed one leaves the destination as it was).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, TypeVar
from urllib.parse import quote

import httpx
import typer

from scratchpad.cli.background import checked
from scratchpad.cli.commands import Command, Group
from scratchpad.cli.output import fail, print_json, print_text
from scratchpad.config import Settings
from scratchpad.errors import ScratchpadError
from scratchpad.fsutil import atomic_write_chunks

files_app = typer.Typer(
    cls=Group, help="A pad's workspace files: list, download, upload, delete.",
    no_args_is_help=True,
)  # fmt: skip
T = TypeVar("T")
TIMEOUT = httpx.Timeout(60.0, connect=10.0)

PadArg = Annotated[str, typer.Argument(metavar="PAD", help="Pad name, e.g. 'main'.")]
PathArg = Annotated[str, typer.Argument(metavar="PATH", help="Path in the pad's workspace.")]


def with_server(job: Callable[[httpx.Client], T]) -> T:
    """Run ``job`` with a client of the pad server; errors as one line, exit 2."""
    from scratchpad.cli.background import endpoint

    try:
        target = endpoint(Settings.load())
        headers = {"Authorization": f"Bearer {target.api_key}"}
        with httpx.Client(base_url=target.url, headers=headers, timeout=TIMEOUT) as client:
            return job(client)
    except ScratchpadError as exc:
        fail(str(exc))
    except httpx.HTTPError as exc:
        fail(f"the pad server did not answer ({exc}); see: scratchpad server status")
    raise typer.Exit(2)


def files_url(pad: str, path: str | None = None) -> str:
    """The URL of a pad's files (or of one); '.' and '..' are sent encoded, so the server
    judges them (an HTTP client would drop them)."""
    base = f"/v1/pads/{quote(pad, safe='')}/files"
    if path is None:
        return base
    dots = {".": "%2E", "..": "%2E%2E"}
    return base + "/" + "/".join(dots.get(part, quote(part, safe="")) for part in path.split("/"))


@files_app.command("ls", cls=Command)
def ls(
    pad: PadArg,
    directory: Annotated[
        str, typer.Argument(metavar="DIR", help="A directory of the workspace (default: its top).")
    ] = "",
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the server's answer as JSON.")
    ] = False,
) -> None:
    """List one directory of a pad's workspace: directories first, then files."""
    answer: dict[str, Any] = with_server(
        lambda client: checked(client.get(files_url(pad), params={"path": directory})).json()
    )
    if as_json:
        print_json(answer)
        return
    for entry in answer["entries"]:
        is_dir = entry["type"] == "dir"
        size = "-" if is_dir else str(entry["size"])
        print_text(f"{'d' if is_dir else 'f'} {size:>12}  {entry['name']}{'/' * is_dir}")
    if not answer["entries"]:
        print_text(f"no files in {answer['path'] or 'the workspace'}", err=True)
    if answer["truncated"]:
        print_text("(more entries not shown: the listing is capped)", err=True)


@files_app.command("get", cls=Command)
def get(
    pad: PadArg,
    path: PathArg,
    output: Annotated[
        str | None,
        typer.Option("--output", "-o", metavar="DEST", help="Where to write it; '-': stdout."),
    ] = None,
) -> None:
    """Download a file of a pad's workspace (to its name here, DEST, or stdout with -o -)."""
    to_stdout = output == "-"
    dest = None if to_stdout else _destination(path, output)

    def download(client: httpx.Client) -> int:
        with client.stream("GET", files_url(pad, path)) as answer:
            chunks = checked(answer).iter_bytes()
            if dest is None:
                return _to_stdout(chunks)
            counted = _Counted(chunks)
            atomic_write_chunks(dest, counted)
            return counted.size

    size = with_server(download)
    if dest is not None:
        print_text(f"wrote {dest} ({size} bytes)")


@files_app.command("put", cls=Command)
def put(
    pad: PadArg,
    local: Annotated[Path, typer.Argument(metavar="LOCAL_FILE", help="The file to upload.")],
    remote: Annotated[
        str | None,
        typer.Argument(metavar="REMOTE_PATH", help="Where in the workspace (default: its name)."),
    ] = None,
) -> None:
    """Upload a file into a pad's workspace (directories on the way are created)."""
    if not local.is_file():
        fail(f"{local} is not a file; give the path of a file to upload")
        raise typer.Exit(2)
    target = remote if remote is not None else local.name
    if target.endswith("/"):
        target += local.name

    def upload(client: httpx.Client) -> dict[str, Any]:
        with local.open("rb") as handle:
            return dict(checked(client.put(files_url(pad, target), content=handle)).json())

    answer = with_server(upload)
    print_text(f"uploaded {answer['path']} ({answer['size']} bytes)")


@files_app.command("rm", cls=Command)
def rm(pad: PadArg, path: PathArg) -> None:
    """Delete a file (or an empty directory) of a pad's workspace."""
    answer = with_server(lambda client: checked(client.delete(files_url(pad, path))).json())
    print_text(f"deleted {answer['deleted']}")


def _destination(path: str, output: str | None) -> Path:
    """Where a download goes: DEST, a file named like it inside DEST when that is a
    directory, or its name in the current directory."""
    name = path.rstrip("/").rsplit("/", 1)[-1]
    if not name or name in (".", ".."):
        fail(f"{path!r} names no file; give the path of a file to download")
        raise typer.Exit(2)
    dest = Path(output) if output is not None else Path(name)
    if dest.is_dir():
        dest = dest / name
    if not dest.parent.is_dir():
        fail(f"there is no directory {dest.parent}; create it or choose another -o")
        raise typer.Exit(2)
    return dest


def _to_stdout(chunks: Iterator[bytes]) -> int:
    size = 0
    for chunk in chunks:
        sys.stdout.buffer.write(chunk)
        size += len(chunk)
    sys.stdout.buffer.flush()
    return size


class _Counted:
    """The chunks of a download, counted as they pass."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self.chunks = chunks
        self.size = 0

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self.chunks:
            self.size += len(chunk)
            yield chunk
