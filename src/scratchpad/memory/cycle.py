"""CycleAgent: one wake → run → sleep cycle of an agent directory, in exactly six events.

1. name the cycle (``YYYYMMDD_HHMMSS``, suffixed ``_2``, ``_3`` in a taken second);
2. wake: read ``active.yaml``, the only read of the cycle (a bad file stops here, unchanged);
3. write ``<cycle>_before.yaml``: the bytes read, or the default state dumped when missing;
4. run_cycle: up to ``max_iterations`` steps of prompt → ``model.complete`` → dispatch; if it
   raises, the after-state is the before-state with ``notes`` set to
   ``Cycle <id> failed: <error>`` and the traceback goes to ``logs/cycle_<id>.log``;
5. write ``<cycle>_after.yaml`` (``last_updated`` untouched);
6. sleep: save ``active.yaml`` with ``last_updated`` stamped (ISO time), so the next cycle's
   ``_before`` is this file. Then the outcome goes to ``logs/cycles.jsonl`` and old
   snapshots are pruned (``keep_last``).

The whole cycle holds ``ROOT/.lock``. It is synchronous, like ``model.complete``; tool calls
are async and run on one private event loop per cycle, which at the end closes the pads it
started (their kernels belong to that loop): pad environments, packages and cell history
persist between cycles, pad variables do not. Call ``run_once`` from plain code, or from
async code through ``await asyncio.to_thread(agent.run_once)``.
"""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from scratchpad.errors import AgentError, AgentStateError
from scratchpad.memory.config import AgentConfig, load_config
from scratchpad.memory.dispatcher import Dispatcher
from scratchpad.memory.journal import CycleLog, CycleRecord, Outcome, append_record
from scratchpad.memory.layout import AgentPaths
from scratchpad.memory.lock import agent_lock
from scratchpad.memory.models import Model
from scratchpad.memory.notes import FileArchive, NotesArchive, StoreArchive, enforce_cap
from scratchpad.memory.prompt import build_prompt
from scratchpad.memory.snapshots import new_cycle_id, prune, write_after, write_before
from scratchpad.memory.state import ReadState, State, clear_stale_temps, read_state, save_state
from scratchpad.memory.toolbox import agent_turn_id, build_tools
from scratchpad.observations.store import ObservationStore
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.tools.context import ToolSessionContext
from scratchpad.tools.registry import ToolRegistry

LOGGED_REPLY_CHARS = 4000


def local_now() -> dt.datetime:
    return dt.datetime.now().astimezone()


def iso(moment: dt.datetime) -> str:
    return moment.isoformat(timespec="seconds")


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
    """What the steps of one cycle share: its id, the rules, the working state, the log."""

    cycle_id: str
    rules: str
    state: State
    log: CycleLog
    iterations: int = 0


class CycleAgent:
    """An agent directory and a model; ``run_once()`` runs one cycle and names it.

    Seams: ``config`` (else ``ROOT/config.yaml``), ``rules`` (else ``ROOT/RULES.md``),
    ``manager`` (else pads under ``ROOT/.scratchpad``), ``store`` (an observation store for
    archived notes; else ``ROOT/notes_archive/``), ``clock`` (local time with its offset).
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
        clock: Callable[[], dt.datetime] = local_now,
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
        cycle holds the directory, AgentStateError when ``active.yaml`` cannot be loaded."""
        rules = self._read_rules()
        with agent_lock(self.paths.lock):
            clear_stale_temps(self.paths.scratch)
            cycle_id = new_cycle_id(self.paths, self.clock())  # 1. name
            with CycleLog(self.paths.cycle_log(cycle_id)) as log:
                result = self._cycle(cycle_id, rules, log)
        self.last_result = result
        return result

    def run_cycles(
        self,
        count: int | None,
        *,
        every_s: float = 0.0,
        on_result: Callable[[CycleResult], None] | None = None,
    ) -> list[CycleResult]:
        """``count`` cycles (None: until interrupted), starting every ``every_s`` seconds."""
        results: list[CycleResult] = []
        while count is None or len(results) < count:
            started = time.monotonic()
            result = self.run()
            if count is not None:
                results.append(result)
            if on_result is not None:
                on_result(result)
            if count is not None and len(results) >= count:
                break
            time.sleep(max(0.0, started + every_s - time.monotonic()))
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

    def _cycle(self, cycle_id: str, rules: str, log: CycleLog) -> CycleResult:
        started = iso(self.clock())
        log.write(f"cycle {cycle_id} started in {self.paths.root}")
        read = self._wake(cycle_id, started, log)  # 2. wake
        write_before(self.paths, cycle_id, read.text)  # 3. before
        run = CycleRun(cycle_id, rules, copy.deepcopy(read.state), log)
        result = self._run_safely(run)  # 4. run_cycle
        state = run.state
        if result.outcome == "failed":  # the before-state, only the notes say what happened
            state = copy.deepcopy(read.state)
            state["notes"] = f"Cycle {cycle_id} failed: {result.error}"
        write_after(self.paths, cycle_id, state)  # 5. after
        self._sleep(state)  # 6. sleep
        self._finish(result, started, log)
        return result

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
            return CycleResult(run.cycle_id, "failed", run.iterations, error=error)

    def run_cycle(self, run: CycleRun) -> CycleResult:
        """The steps of a cycle on a private event loop that lives as long as the cycle."""
        loop = asyncio.new_event_loop()
        manager = self.manager or ScratchpadManager(workspace=self.paths.root)
        try:
            registry, context = build_tools(self.paths, self.config, manager, self.store)
            dispatcher = Dispatcher(registry, context, loop.run_until_complete)
            return self._steps(run, dispatcher, registry, context)
        finally:
            loop.run_until_complete(manager.close_all())
            loop.close()

    def _steps(
        self,
        run: CycleRun,
        dispatcher: Dispatcher,
        registry: ToolRegistry,
        context: ToolSessionContext,
    ) -> CycleResult:
        archive = self._archive(run.cycle_id)
        limit = self.config.max_iterations
        while run.iterations < limit:
            run.iterations += 1
            self._cap_notes(run, archive)
            prompt = build_prompt(
                run.state,
                cycle_id=run.cycle_id,
                iteration=run.iterations,
                max_iterations=limit,
                tools=registry.dump(context),
                fragments=registry.prompt_fragments(),
            )
            reply = self.model.complete(system=run.rules, user=prompt)
            run.log.write(f"step {run.iterations}: reply: {reply[:LOGGED_REPLY_CHARS]}")
            step = dispatcher.dispatch(reply, run.state)
            run.log.write(f"step {run.iterations}: {step.kind} {step.note or ''}")
            if step.done:
                self._cap_notes(run, archive)
                return CycleResult(run.cycle_id, "done", run.iterations, summary=step.summary)
        self._cap_notes(run, archive)
        return CycleResult(run.cycle_id, "max_iterations", run.iterations)

    def _archive(self, cycle_id: str) -> NotesArchive:
        if self.store is None:
            return FileArchive(self.paths, cycle_id)
        return StoreArchive(
            self.store,
            turn_id=agent_turn_id(self.paths),
            cycle_id=cycle_id,
            ttl_s=self.config.archive_ttl_s,
        )

    def _cap_notes(self, run: CycleRun, archive: NotesArchive) -> None:
        if enforce_cap(run.state, self.config.notes_cap_chars, archive):
            run.log.write("notes were over the cap: the oldest part moved to the archive")

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
