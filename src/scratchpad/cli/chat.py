"""``scratchpad chat``: talk to a model that works in a pad, from a terminal."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import secrets
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from scratchpad.agent import Session, SessionEvent
from scratchpad.cli.output import console, err_console, shown
from scratchpad.errors import ScratchpadError
from scratchpad.fsutil import PRIVATE_FILE_MODE, atomic_write_bytes, private_dir
from scratchpad.llm.adapters import create_provider
from scratchpad.observations import ObservationStore
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.tools.builtin import builtin_registry
from scratchpad.vault.forms import FORM_BLOCK, find_blocks

SYSTEM = (
    "You are a capable assistant with a persistent Python pad named {pad!r}: use the "
    "scratchpad tool (action exec, name {pad!r}) to compute, inspect files and data, and "
    "make plots. Variables persist between calls. Answer plainly when you are done."
)
RESULT_LINES = 20  # of a tool's result shown (the model gets all of it)
RESULT_LINE_CHARS = 200
EXIT_WORDS = {"/exit", "/quit", "exit", "quit"}
FENCES = ("```data-vault-form", "~~~data-vault-form")


async def run_chat(manager: ScratchpadManager, model: str | None, pad: str) -> bool:
    """Chat until the person leaves; whether every turn succeeded (a failed turn is reported
    and the chat goes on, but the command then exits non-zero)."""
    provider = create_provider(model, settings=manager.settings)
    store = ObservationStore(settings=manager.settings)
    session_id = secrets.token_hex(8)  # names the saved history and the images' folder
    session = Session(
        provider=provider,
        manager=manager,
        store=store,
        system=SYSTEM.format(pad=pad),
        registry=builtin_registry(manager, store, credentials=True),
        session_id=session_id,
    )
    images = manager.settings.home / "chat-images" / session_id
    console.print(
        f"[dim]{provider.name}:{provider.model} · pad {pad!r} · /exit to leave · "
        "Ctrl-C stops a running cell[/dim]"
    )
    failed = False
    try:
        while (text := await _read_line()) is not None:
            if text.strip() in EXIT_WORDS:
                break
            if not text.strip():
                continue
            try:
                while text:  # a credential form the model asked for comes back as a note
                    reply = await _turn(session, manager, text, images)
                    text = await _requested_form(reply, manager)
            except ScratchpadError as exc:  # a failed turn is reported; the chat goes on
                err_console.print(f"[red]error:[/red] {shown(str(exc))}")
                failed = True
    finally:
        store.close()
    return not failed


async def _requested_form(reply: str, manager: ScratchpadManager) -> str:
    """The last credential form of the reply, filled in here: the note for the model ('' when
    the reply asked for none)."""
    forms = [spec for kind, spec in find_blocks(reply) if kind == FORM_BLOCK]
    if not forms:
        return ""
    from scratchpad.cli.connect import fill_requested_form

    # On this thread (the chat waits for the person anyway), with Ctrl-C raising here: it
    # stops waiting for the probe, and the chat goes on.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return fill_requested_form(forms[-1], manager.settings)
    finally:
        signal.signal(signal.SIGINT, previous)


async def _turn(session: Session, manager: ScratchpadManager, text: str, images: Path) -> str:
    """One turn shown as it streams; the reply's text."""
    loop = asyncio.get_running_loop()
    previous = signal.getsignal(signal.SIGINT)
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        loop.add_signal_handler(
            signal.SIGINT, lambda: loop.create_task(manager.cancel_all_running())
        )
    reply = ""
    shown_text = FormBlocks()
    screen = Screen(images)
    try:
        async for event in session.turn_stream(text):
            if event.kind == "text_delta":
                event = SessionEvent("text_delta", {"text": shown_text.feed(event.data["text"])})
            else:
                screen.show(SessionEvent("text_delta", {"text": shown_text.flush()}))
            screen.show(event)
            if event.kind == "turn_end":
                reply = str(event.data["text"])
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.remove_signal_handler(signal.SIGINT)
            signal.signal(signal.SIGINT, previous)  # Ctrl-C at the prompt ends the chat again
    console.print()
    return reply


class Screen:
    """The events of a turn on the terminal: the model's text as it streams, each tool call
    and its result's text (at most ``RESULT_LINES`` lines) on lines of their own."""

    def __init__(self, images: Path) -> None:
        self.images = images
        self.open_line = False  # the model's text stopped mid-line

    def show(self, event: SessionEvent) -> None:
        data = event.data
        if event.kind == "text_delta":
            text = str(data["text"])
            console.print(shown(text), end="")
            self.open_line = self.open_line if not text else not text.endswith("\n")
            return
        if self.open_line:  # a tool's lines never continue the model's sentence
            console.print()
            self.open_line = False
        if event.kind == "tool_call":
            code = data["input"].get("code") if isinstance(data.get("input"), dict) else None
            detail = f": {shown(str(code).splitlines()[0][:80])}" if code else ""
            err_console.print(f"[cyan]› {shown(str(data['name']))}{detail}[/cyan]")
        elif event.kind == "tool_progress":
            err_console.print(f"[dim]  … {shown(str(data['message']))}[/dim]")
        elif event.kind == "tool_result":
            self._result(data)
        elif event.kind == "cap_exhausted":
            err_console.print("[yellow]  tool-round cap reached; asking for a summary[/yellow]")

    def _result(self, data: dict[str, Any]) -> None:
        colour = "green" if data["ok"] else "red"
        outcome = "ok" if data["ok"] else "failed"
        err_console.print(f"[{colour}]  ‹ {shown(str(data.get('name', '')))} {outcome}[/{colour}]")
        blocks = FormBlocks()  # a form the tool hands the model is filled in, not shown
        lines = (blocks.feed(str(data["text"])) + blocks.flush()).strip().splitlines()
        for line in lines[:RESULT_LINES]:
            more = len(line) - RESULT_LINE_CHARS
            cut = f"{line[:RESULT_LINE_CHARS]} … ({more} more characters)" if more > 0 else line
            err_console.print(f"    {shown(cut)}")
        if len(lines) > RESULT_LINES:
            err_console.print(f"[dim]    … {len(lines) - RESULT_LINES} more lines[/dim]")
        for image in data.get("images", []):
            path = _save(self.images, image.media_type, image.data)
            err_console.print(f"[magenta]  image saved: {shown(path)}[/magenta]")


class FormBlocks:
    """The model's text as it streams, without its credential form blocks (the form is
    filled in after the reply). Only a line that may open such a block waits for its end."""

    def __init__(self) -> None:
        self._line = ""  # the start of a line that may open a block
        self._midline = False  # part of this line was shown already
        self._hiding = False

    def feed(self, text: str) -> str:
        shown_now: list[str] = []
        for piece in text.splitlines(keepends=True):
            ended = piece.endswith("\n")
            if self._midline and not self._hiding:
                shown_now.append(piece)
                self._midline = not ended
                continue
            self._line += piece
            if not ended:
                if not self._hiding and not _opens(self._line, cut_short=True):
                    shown_now.append(self._line)
                    self._line, self._midline = "", True
                continue
            line, self._line = self._line, ""
            if self._hiding:
                self._hiding = line.strip() not in ("```", "~~~")
            elif _opens(line):
                self._hiding = True
            else:
                shown_now.append(line)
        return "".join(shown_now)

    def flush(self) -> str:
        rest = "" if self._hiding else self._line
        self._line, self._midline, self._hiding = "", False, False
        return rest


def _opens(line: str, cut_short: bool = False) -> bool:
    """Whether ``line`` opens a credential form block (``cut_short``: may, once it ends)."""
    start = line.strip()
    if cut_short and start and any(fence.startswith(start) for fence in FENCES):
        return True
    return start.startswith(FENCES)


def _save(directory: Path, media_type: str, data: str) -> Path:
    """An image of the chat, kept in the home: private like everything there."""
    private_dir(directory)
    suffix = ".png" if media_type == "image/png" else ".jpg"
    path = directory / f"image-{len(list(directory.iterdir())) + 1}{suffix}"
    atomic_write_bytes(path, base64.b64decode(data), mode=PRIVATE_FILE_MODE)
    return path


def _settle(future: asyncio.Future[str | None], value: str | None) -> None:
    if not future.done():
        future.set_result(value)


async def _read_line() -> str | None:
    """The next line typed; read on a daemon thread so Ctrl-C never waits for Enter."""
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[str | None] = loop.create_future()

    def read() -> None:
        try:
            line = sys.stdin.readline()
        except (EOFError, OSError, ValueError):
            line = ""
        value = line.rstrip("\n") if line else None
        loop.call_soon_threadsafe(_settle, answer, value)

    sys.stdout.write("you> ")
    sys.stdout.flush()
    threading.Thread(target=read, daemon=True, name="chat-input").start()
    return await answer
