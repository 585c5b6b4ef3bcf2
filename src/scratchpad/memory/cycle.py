"""CycleAgent: one wake → run → sleep cycle of an agent directory, in exactly six events.

1. name the cycle (its UTC start time ``YYYYMMDD_HHMMSS``, suffixed ``_2``, ``_3`` in a taken
   second; UTC, so ids keep their order when the local clock goes back);
2. wake: read ``active.yaml``, the only read of the cycle (a bad file stops here, unchanged);
3. write ``<cycle>_before.yaml``: the bytes read, or the default state dumped when missing;
4. run_cycle: up to ``max_iterations`` steps of prompt → the model's reply → dispatch; if it
   raises, the after-state is the before-state with the line ``Cycle <id> failed: <error>``
   (at most ~2000 characters of the error) appended to its ``notes``, under the same cap as
   every note (the oldest notes move to the archive), and the full error and traceback go to
   ``logs/cycle_<id>.log``;
5. write ``<cycle>_after.yaml`` (``last_updated`` untouched);
6. sleep: save ``active.yaml`` with ``last_updated`` stamped (ISO time), so the next cycle's
   ``_before`` is this file. Then the outcome goes to ``logs/cycles.jsonl`` and old
   snapshots are pruned (``keep_last``).

The whole cycle holds ``ROOT/.lock``. It is synchronous; the model call and the tool calls are
async and all run on one private event loop per cycle (an ``asyncio.Runner``), so a model
whose client belongs to a loop and the tools share it (a synchronous model is called on a
thread, ``models.reply_of``, and awaited there): Ctrl-C during a model or tool call
cancels it (a tool cleans up, e.g. the shell tool stops its command) and the cycle stops with
KeyboardInterrupt. Pads: with ``tools.pads`` on and no manager passed in, the
cycle builds a ScratchpadManager for the agent (``toolbox.agent_manager``: pads working in
``ROOT/workspace``, the rest of ``ROOT`` out of their reach) and lets go of its pads at the end
(``detach_all``: local kernels belong to the cycle's loop and are closed; remote pads keep
running on their server). Pad environments, packages and cell history persist between
cycles, local pad variables do not. A manager passed in is never closed by the cycle: its
owner decides (the pads the cycle started in it belong to the cycle's loop, which is closed
at the end, so a manager shared between cycles is meant for remote pads). Call ``run_once``
from plain code, or from async code through ``await asyncio.to_thread(agent.run_once)``.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from scratchpad.config import Settings
from scratchpad.errors import AgentError, AgentStateError, ConfigError
from scratchpad.memory.clock import Clock, iso, local_now
from scratchpad.memory.config import AgentConfig, load_config
from scratchpad.memory.dispatcher import Dispatcher
from scratchpad.memory.journal import CycleLog, CycleRecord, Outcome, append_record
from scratchpad.memory.layout import AgentPaths, ensure_workspace
from scratchpad.memory.lock import agent_lock
from scratchpad.memory.models import Model, reply_of
from scratchpad.memory.notes import (
    FileArchive,
    NotesArchive,
    StoreArchive,
    append_note,
    enforce_cap,
)
from scratchpad.memory.prompt import build_prompt
from scratchpad.memory.snapshots import new_cycle_id, prune, write_after, write_before
from scratchpad.memory.state import ReadState, State, clear_stale_temps, read_state, save_state
from scratchpad.memory.toolbox import agent_manager, agent_turn_id, build_tools
from scratchpad.observations.store import ObservationStore
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.tools.context import ToolSessionContext
from scratchpad.tools.registry import ToolRegistry

LOGGED_REPLY_CHARS = 4000
ERROR_CHARS = 2000  # of a failed cycle's error in its result, note and record


@dataclass(frozen=True, slots=True)
class CycleResult:
    """How a cycle ended: done, max_iterations (no ``done`` in time) or failed."""

    cycle_id: str
    outcome: Outcome
    iterations: int
    error: str | None = None
    summary: str | None = None


@dataclass
class CycleRun:
    """What the steps of one cycle share: its id, the rules, the working state, the log, the
    pad manager (None when pads are off; ``owns_pads`` when the cycle built it) and the
    person's settings (None when no tool runs code)."""

    cycle_id: str
    rules: str
    state: State
    log: CycleLog
    pads: ScratchpadManager | None = None
    owns_pads: bool = False
    iterations: int = 0
    settings: Settings | None = None


class CycleAgent:
    """An agent directory and a model; ``run_once()`` runs one cycle and names it.

    Seams: ``config`` (else ``ROOT/config.yaml``), ``rules`` (else ``ROOT/RULES.md``),
    ``manager`` (else the agent's own pads, see ``toolbox.agent_manager``), ``store`` (an
    observation store for archived notes; else ``ROOT/notes_archive/``), ``clock`` (local
    time with its offset; cycle ids use its UTC time).
    """

    def __init__(
        self,
        root: str | Path,
        model: Model,
        *,
        config: AgentConfig | None = None,
        rules: str | None = None,
        manager: ScratchpadManager | None = None,
        store: ObservationStore | None = None,
        clock: Clock = local_now,
    ) -> None:
        self.paths = AgentPaths.of(root)
        self.model = model
        self.config = config if config is not None else load_config(self.paths.config)
        self.rules = rules
        self.manager = manager
        self.store = store
        self.clock = clock
        self.last_result: CycleResult | None = None

    def run_once(self) -> str:
        """Run one cycle; its id."""
        return self.run().cycle_id

    def run(self) -> CycleResult:
        """Run one cycle; how it ended. AgentLockedError (nothing written) when another
        cycle holds the directory, AgentStateError when ``active.yaml`` cannot be loaded,
        AgentError when called inside a running event loop, ConfigError for a bad pad
        setting (these three before anything is written)."""
        _refuse_running_loop()
        rules = self._read_rules()
        settings = self._settings()
        pads = self._pads(settings)
        with agent_lock(self.paths.lock):
            clear_stale_temps(self.paths.scratch)
            if settings is not None:
                ensure_workspace(self.paths)
            cycle_id = new_cycle_id(self.paths, self.clock())  # 1. name
            with CycleLog(self.paths.cycle_log(cycle_id), self.clock) as log:
                owns = pads is not self.manager
                run = CycleRun(cycle_id, rules, {}, log, pads, owns, settings=settings)
                result = self._cycle(run)
        self.last_result = result
        return result

    def run_cycles(
        self,
        count: int | None,
        *,
        every_s: float = 0.0,
        on_result: Callable[[CycleResult], None] | None = None,
    ) -> list[CycleResult]:
        """``count`` cycles, one starting every ``every_s`` seconds; their results. With
        ``count`` None it runs until interrupted and keeps no results (``on_result`` sees
        every one)."""
        cycles: Iterable[int] = itertools.count() if count is None else range(count)
        results: list[CycleResult] = []
        next_start = time.monotonic()
        for _ in cycles:
            time.sleep(max(0.0, next_start - time.monotonic()))
            next_start = time.monotonic() + every_s
            result = self.run()
            if on_result is not None:
                on_result(result)
            if count is not None:
                results.append(result)
        return results

    def _read_rules(self) -> str:
        if self.rules is not None:
            return self.rules
        try:
            return self.paths.rules.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise AgentError(
                f"{self.paths.rules} not found: create the agent with `scratchpad agent init "
                f"{self.paths.root}`, or pass rules= to CycleAgent"
            ) from None

    def _settings(self) -> Settings | None:
        """The person's settings when a tool runs code (pads, shell), else None."""
        tools = self.config.tools
        if not (tools.shell or (tools.pads and self.manager is None)):
            return None
        try:
            return Settings.load()
        except ConfigError as exc:
            raise ConfigError(
                f"{exc} (read for the agent's pads and shell; an agent without them has "
                f"`tools: {{pads: false, shell: false}}` in {self.paths.config})"
            ) from exc

    def _pads(self, settings: Settings | None) -> ScratchpadManager | None:
        """The manager passed in, else the agent's own when pads are on, else None."""
        if self.manager is not None or not self.config.tools.pads or settings is None:
            return self.manager
        return agent_manager(self.paths, settings)

    def _cycle(self, run: CycleRun) -> CycleResult:
        cycle_id, log = run.cycle_id, run.log
        started = iso(self.clock())
        log.write(f"cycle {cycle_id} started in {self.paths.root}")
        read = self._wake(cycle_id, started, log)  # 2. wake
        write_before(self.paths, cycle_id, read.text)  # 3. before
        run.state = copy.deepcopy(read.state)
        result = self._run_safely(run)  # 4. run_cycle
        state = run.state
        if result.outcome == "failed":  # the before-state, only the notes say what happened
            state = self._failed_state(read.state, run, result.error)
        write_after(self.paths, cycle_id, state)  # 5. after
        self._sleep(state)  # 6. sleep
        self._finish(result, started, log)
        return result

    def _failed_state(self, before: State, run: CycleRun, error: str | None) -> State:
        """The before-state with the failure appended to its notes (capped like any note)."""
        state = copy.deepcopy(before)
        append_note(state, f"Cycle {run.cycle_id} failed: {error}")
        try:
            self._cap_notes(state, self._archive(run.cycle_id), run.log)
        except Exception as exc:  # the next cycle caps them; the failure must be recorded
            run.log.write(f"notes could not be archived, kept whole: {type(exc).__name__}: {exc}")
        return state

    def _wake(self, cycle_id: str, started: str, log: CycleLog) -> ReadState:
        try:
            read = read_state(self.paths.active)
        except AgentStateError as exc:
            log.write(f"wake failed, nothing else was written: {exc}")
            ended = iso(self.clock())
            append_record(
                self.paths.cycles_log,
                CycleRecord(cycle_id, "failed", 0, started, ended, error=str(exc)),
            )
            raise
        log.write("wake: read active.yaml" if read.existed else "wake: no active.yaml yet")
        return read

    def _run_safely(self, run: CycleRun) -> CycleResult:
        """run_cycle; any exception becomes a failed result (traceback in the log)."""
        try:
            return self.run_cycle(run)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            run.log.write(f"failed at step {run.iterations}: {error}\n{traceback.format_exc()}")
            return CycleResult(run.cycle_id, "failed", run.iterations, error=self._short(error))

    def _short(self, error: str) -> str:
        """The error, cut to ERROR_CHARS (the whole of it is in the cycle's log)."""
        if len(error) <= ERROR_CHARS:
            return error
        more = len(error) - ERROR_CHARS
        return f"{error[:ERROR_CHARS]} [... {more} more characters in the cycle's log]"

    def run_cycle(self, run: CycleRun) -> CycleResult:
        """The steps of a cycle on a private event loop (an ``asyncio.Runner``) that lives as
        long as the cycle and runs its model calls and tool calls: Ctrl-C in one cancels it,
        and tasks left over are cancelled when the loop closes. Pads of a manager the cycle
        built are let go of at the end."""
        with asyncio.Runner() as runner:
            registry, context = build_tools(
                self.paths, self.config, run.pads, self.store, run.settings
            )
            dispatcher = Dispatcher(registry, context, runner.run)
            try:
                return self._steps(run, runner, dispatcher, registry, context)
            finally:
                if run.pads is not None and run.owns_pads:
                    runner.run(run.pads.detach_all())

    def _steps(
        self,
        run: CycleRun,
        runner: asyncio.Runner,
        dispatcher: Dispatcher,
        registry: ToolRegistry,
        context: ToolSessionContext,
    ) -> CycleResult:
        archive = self._archive(run.cycle_id)
        limit = self.config.max_iterations
        while run.iterations < limit:
            run.iterations += 1
            self._cap_notes(run.state, archive, run.log)
            prompt = build_prompt(
                run.state,
                cycle_id=run.cycle_id,
                iteration=run.iterations,
                max_iterations=limit,
                tools=registry.dump(context),
                fragments=registry.prompt_fragments(),
            )
            reply = runner.run(reply_of(self.model, system=run.rules, user=prompt))
            run.log.write(f"step {run.iterations}: reply: {reply[:LOGGED_REPLY_CHARS]}")
            step = dispatcher.dispatch(reply, run.state)
            run.log.write(f"step {run.iterations}: {step.kind} {step.note or ''}")
            if step.done:
                self._cap_notes(run.state, archive, run.log)
                return CycleResult(run.cycle_id, "done", run.iterations, summary=step.summary)
        self._cap_notes(run.state, archive, run.log)
        return CycleResult(run.cycle_id, "max_iterations", run.iterations)

    def _archive(self, cycle_id: str) -> NotesArchive:
        if self.store is None:
            return FileArchive(self.paths, cycle_id, self.clock)
        return StoreArchive(
            self.store,
            turn_id=agent_turn_id(self.paths),
            cycle_id=cycle_id,
            ttl_s=self.config.archive_ttl_s,
        )

    def _cap_notes(self, state: State, archive: NotesArchive, log: CycleLog) -> None:
        if enforce_cap(state, self.config.notes_cap_chars, archive):
            log.write("notes were over the cap: the oldest part moved to the archive")

    def _sleep(self, state: State) -> None:
        stamped = dict(state)
        stamped["last_updated"] = iso(self.clock())
        save_state(self.paths.active, stamped)

    def _finish(self, result: CycleResult, started: str, log: CycleLog) -> None:
        ended = iso(self.clock())
        record = CycleRecord(
            result.cycle_id,
            result.outcome,
            result.iterations,
            started,
            ended,
            result.error,
            result.summary,
        )
        append_record(self.paths.cycles_log, record)
        removed = prune(self.paths, self.config.keep_last)
        if removed:
            log.write(f"retention (keep_last {self.config.keep_last}): {len(removed)} removed")
        log.write(f"outcome: {result.outcome} after {result.iterations} step(s)")


def _refuse_running_loop() -> None:
    """AgentError when this thread runs an event loop (the cycle runs its own)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise AgentError(
        "CycleAgent.run cannot be called inside a running event loop: call run_once from "
        "plain code, or `await asyncio.to_thread(agent.run_once)` from async code"
    )
