"""The headless probe: a second model, in a session of its own, tests one submission.

The session keeps nothing (no id, no history, no files) and has no vault: its pads live in a
private directory of their own (``<home>/probes/<id>/``, 0700) whose pad manager gives them
no credentials. The submitted values reach the pad only as ``credentials.env`` in that
directory (0600); the file and the directory are removed in ``finally``, the pads with them.

A probe's directory is named after the process running it, so one left behind by a process
that died (killed, the machine lost power) is removed by the next probe or server start.

Everything the probe says or prints passes a scrubber that knows every submitted value (see
:mod:`scratchpad.connect.scrubbing`) before its model or anyone else sees it. The probe ends
with exactly one verdict: the last one it gave, a failure ("Probe ended without a
verdict.") when it gave none, or a failure when it ran out of time.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from scratchpad.agent.events import SessionEvent
from scratchpad.agent.session import Session
from scratchpad.config import Settings
from scratchpad.connect.probe_tools import ProbeEvent, ProbeTools, Verdict
from scratchpad.connect.prompt import ENV_FILE_NAME, USER_MESSAGE, env_variable, probe_prompt
from scratchpad.connect.scrubbing import SubmissionScrubber
from scratchpad.connect.submissions import Submission
from scratchpad.errors import PadClosedError
from scratchpad.fsutil import PRIVATE_FILE_MODE, private_dir
from scratchpad.llm.provider import Provider
from scratchpad.runtime.backends import LocalBackend
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.runtime.proctree import running
from scratchpad.tools.builtin import builtin_registry
from scratchpad.tools.scratchpad_tool import NAME as SCRATCHPAD

PROBES_DIR = "probes"
STOP_WAIT_S = 10.0
_running: set[Probe] = set()  # the probes under way in this process
NO_VERDICT = Verdict(
    "failed",
    error="Probe ended without a verdict.",
    follow_up="Submit again; if it happens again, the probe's model may not follow its "
    "instructions (see SCRATCHPAD_PROBE_MODEL).",
)


def timed_out(timeout_s: float) -> Verdict:
    return Verdict(
        "failed",
        error=f"Probe timed out after {timeout_s:g}s.",
        follow_up="Check that the service is reachable from this machine, then submit again.",
    )


class Probe:
    """One run of the probe; iterate :meth:`events`, then read :attr:`verdict`."""

    def __init__(
        self,
        submission: Submission,
        *,
        provider: Provider,
        settings: Settings,
        scrub: SubmissionScrubber | None = None,
    ) -> None:
        self.submission = submission
        self.provider = provider
        self.settings = settings
        self.scrub = scrub or SubmissionScrubber(submission)
        self.verdict: Verdict = NO_VERDICT
        self._turn: asyncio.Task[str] | None = None
        self._stopped = ""  # why the probe was stopped from outside
        self.finished = asyncio.Event()  # set once it has cleaned up

    def stop(self, reason: str) -> None:
        """End the probe now (its model's turn cancelled, its pads removed): it then fails
        with PadClosedError saying ``reason``."""
        self._stopped = reason
        if self._turn is not None:
            self._turn.cancel()

    async def events(self) -> AsyncIterator[ProbeEvent]:
        """What the probe does, as it happens; the verdict is set when this ends. Errors of
        the probe's model or pad (LLMError, PadError) propagate."""
        directory = self._directory()
        env_path = directory / ENV_FILE_NAME
        manager: ScratchpadManager | None = None
        try:
            write_env_file(env_path, self._env())
            manager = probe_manager(self.settings, directory)
            _running.add(self)
            async for event in self._run(manager, env_path):
                yield event
        finally:
            env_path.unlink(missing_ok=True)
            if manager is not None:
                await _remove_pads(manager)
            await asyncio.to_thread(shutil.rmtree, directory, True)
            _running.discard(self)
            self.finished.set()

    def _directory(self) -> Path:
        clear_stale_probes(self.settings.home)
        parent = private_dir(self.settings.home / PROBES_DIR)
        directory = parent / f"{self.submission.id}-{os.getpid()}-{secrets.token_hex(4)}"
        directory.mkdir(mode=0o700)
        return directory

    def _env(self) -> dict[str, str]:
        skipped = set(self.submission.skipped)
        return {
            env_variable(name): value
            for name, value in self.submission.values.items()
            if name not in skipped and value != ""
        }

    async def _run(self, manager: ScratchpadManager, env_path: Path) -> AsyncIterator[ProbeEvent]:
        queue: asyncio.Queue[ProbeEvent | None] = asyncio.Queue()
        tools = ProbeTools(self.submission.form, queue.put_nowait, self.scrub)
        timeout_s = self.settings.probe_timeout_s
        session = Session(
            provider=self.provider,
            manager=manager,
            system=probe_prompt(self.submission, env_path, timeout_s),
            registry=builtin_registry(manager, images=False, extra=tools.tools()),
            settings=self.settings,
            persist=False,
            scrub=self.scrub,
        )
        session.subscribe(Relay(self.scrub, queue.put_nowait))
        turn = self._turn = asyncio.create_task(session.turn(USER_MESSAGE))
        turn.add_done_callback(lambda _: queue.put_nowait(None))
        verdict: Verdict | None = None
        try:
            async with asyncio.timeout(timeout_s):
                while (event := await queue.get()) is not None:
                    yield event
                if self._stopped:
                    raise PadClosedError(f"the probe was stopped: {self._stopped}")
                turn.result()  # the model's or the pad's failure, raised here
            verdict = tools.verdict
        except TimeoutError:
            verdict = timed_out(timeout_s)
        finally:
            if not turn.done():
                turn.cancel()
                await asyncio.gather(turn, return_exceptions=True)
        self.verdict = verdict or NO_VERDICT


class Relay:
    """Session events that the person at the form sees, scrubbed (the probe tools emit their
    own): the model's prose through one stream scrubber, flushed when anything else happens."""

    def __init__(self, scrub: SubmissionScrubber, put: Callable[[ProbeEvent], None]) -> None:
        self.scrub = scrub
        self.put = put
        self._prose = scrub.stream()

    def __call__(self, event: SessionEvent) -> None:
        data = event.data
        if event.kind == "text_delta":
            self._text(self._prose.feed(str(data["text"])))
            return
        self._text(self._prose.flush())
        if event.kind == "tool_call" and data["name"] == SCRATCHPAD:
            tool_input = data["input"] if isinstance(data["input"], dict) else {}
            self.put(ProbeEvent("cell_start", {
                "action": self.scrub(str(tool_input.get("action", "exec"))),
                "code": self.scrub(str(tool_input.get("code", ""))),
                "description": self.scrub(str(tool_input.get("one_line_description", ""))),
            }))  # fmt: skip
        elif event.kind == "tool_result" and data["name"] == SCRATCHPAD:
            text = self.scrub(str(data["text"]))
            self.put(ProbeEvent("cell_result", {"ok": bool(data["ok"]), "text": text}))

    def _text(self, text: str) -> None:
        if text:
            self.put(ProbeEvent("text", {"text": text}))


def clear_stale_probes(home: Path) -> None:
    """Remove the directories of probes whose process is gone (their credentials with them)."""
    try:
        entries = list((home / PROBES_DIR).iterdir())
    except OSError:
        return
    for entry in entries:
        parts = entry.name.split("-")
        if len(parts) == 3 and parts[1].isdigit() and not running(int(parts[1])):
            shutil.rmtree(entry, ignore_errors=True)


def write_env_file(path: Path, env: dict[str, str]) -> None:
    """``KEY="value"`` lines, each value JSON-escaped (a valid double-quoted .env value),
    created 0600 whatever the umask; the file must not exist yet."""
    text = "".join(f"{key}={json.dumps(value, ensure_ascii=False)}\n" for key, value in env.items())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, PRIVATE_FILE_MODE)
    os.fchmod(fd, PRIVATE_FILE_MODE)
    with os.fdopen(fd, "wb") as handle:
        handle.write(text.encode("utf-8"))


def probe_manager(settings: Settings, directory: Path) -> ScratchpadManager:
    """Pads working in ``directory`` (their home inside it) that get no credentials at all
    and, sandboxed, cannot reach the rest of the server's home (which holds ``directory``);
    thrown away after one probe, so they neither checkpoint nor sleep."""
    probe_settings = settings.with_home(directory / ".scratchpad").model_copy(
        update={"backend": "local", "checkpoint_pad_mb": 0, "sleep_after_s": 0}
    )
    backend = LocalBackend(probe_settings, directory, guarded=(settings.home,))
    return ScratchpadManager(settings=probe_settings, backend=backend)


async def stop_probes(reason: str, wait_s: float = STOP_WAIT_S) -> None:
    """Stop every probe under way (a server shutting down) and wait, up to ``wait_s``, for
    them to clean up: each ends its stream saying ``reason``."""
    probes = list(_running)
    for probe in probes:
        probe.stop(reason)
    if probes:
        waits = [asyncio.ensure_future(probe.finished.wait()) for probe in probes]
        await asyncio.wait(waits, timeout=wait_s)
        for waiting in waits:
            waiting.cancel()


async def _remove_pads(manager: ScratchpadManager) -> None:
    for name in manager.names():
        try:
            await manager.remove(name)
        except Exception:  # the directory goes anyway; a kernel must not outlive the probe
            await manager.close(name)
    await manager.close_all(reason="the probe ended")
