"""The runtime contract, written once and run against every backend: the local runtime, the
remote runtime talking to a real ``scratchpad serve`` on a loopback port, and (from
tests/ray/test_contract_on_ray.py) pads held by actors of a real local Ray cluster."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from scratchpad import Cell, DisplayEvent, OutputEvent, ProgressEvent
from scratchpad.errors import InstallError, InvalidInputError, PadClosedError
from scratchpad.runtime.base import ScratchpadRuntime
from scratchpad.runtime.manager import ScratchpadManager
from tests.conftest import wait_until_busy
from tests.ray.cluster import end_pads
from tests.server_helpers import running_server

REMOTE_KEY = "contract-key"


@pytest.fixture(params=["local", "remote"])  # and "ray": tests/ray/test_contract_on_ray.py
def runtime_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def backend(
    manager: ScratchpadManager,
    runtime_kind: str,
    workspace: Path,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> AsyncIterator[ScratchpadManager]:
    """A manager whose pads are local, on a real server over loopback, or held by actors
    of a real local Ray cluster (skipped, saying what to install, without Ray)."""
    if runtime_kind == "local":
        yield manager
        return
    if runtime_kind == "ray":
        cluster = request.getfixturevalue("ray_cluster")
        ray_settings = manager.settings.model_copy(
            update={"backend": "ray", "ray_address": cluster.address,
                    "ray_namespace": f"contract-{uuid.uuid4().hex[:12]}"}
        )  # fmt: skip
        on_ray = ScratchpadManager(workspace=workspace, settings=ray_settings)
        try:
            yield on_ray
        finally:
            await on_ray.close_all()
            end_pads(ray_settings.ray_namespace)
        return
    home = tmp_path / "server-home"  # bound, as the local manager is: its home is in there
    with running_server(home, tmp_path, REMOTE_KEY, workspace=workspace) as (url, _):
        remote_settings = manager.settings.model_copy(
            update={"backend": "remote", "remote_url": url, "remote_api_key": REMOTE_KEY}
        )
        remote = ScratchpadManager(settings=remote_settings)
        try:
            yield remote
        finally:
            await remote.close_all()


@pytest.fixture
async def pad(backend: ScratchpadManager) -> ScratchpadRuntime:
    return await backend.get_or_create("main")


async def test_state_persists_between_cells(pad: ScratchpadRuntime) -> None:
    first = await pad.execute("x = 41", description="define")
    second = await pad.execute("x + 1")
    assert first.status == "ok" and first.result is None
    assert second.status == "ok"
    assert second.result == "42"


async def test_last_expression_is_the_result_like_out(pad: ScratchpadRuntime) -> None:
    cell = await pad.execute("items = {'a': [1, 2]}\nitems")
    assert cell.result == "{'a': [1, 2]}"
    underscore = await pad.execute("_")
    assert underscore.result == "{'a': [1, 2]}"
    none_result = await pad.execute("None")
    assert none_result.result is None


async def test_cell_fields_are_filled(pad: ScratchpadRuntime) -> None:
    cell = await pad.execute("print('hi')", description="greet", estimated_seconds=5)
    assert isinstance(cell, Cell)
    assert cell.code == "print('hi')"
    assert cell.description == "greet"
    assert cell.estimated_time == "5s"
    assert cell.stdout == "hi\n"
    assert cell.stderr == ""
    assert cell.error is None
    assert len(cell.id) == 12
    assert cell.duration_s > 0
    assert pad.cells[-1] is cell


async def test_error_is_data_and_the_kernel_survives(pad: ScratchpadRuntime) -> None:
    await pad.execute("kept = 'yes'")
    cell = await pad.execute("print('before')\n{}['missing']")
    assert cell.status == "error"
    assert cell.stdout == "before\n"
    assert cell.error is not None
    assert "KeyError: 'missing'" in cell.error
    assert 'File "<cell' in cell.error
    assert "worker.py" not in cell.error  # the kernel's own frames are hidden
    assert (await pad.execute("kept")).result == "'yes'"


async def test_syntax_error_is_reported(pad: ScratchpadRuntime) -> None:
    cell = await pad.execute("def broken(:\n    pass")
    assert cell.status == "error"
    assert cell.error is not None and "SyntaxError" in cell.error
    assert "ast.py" not in cell.error and "worker.py" not in cell.error


async def test_a_failed_install_raises_on_every_backend(pad: ScratchpadRuntime) -> None:
    """The protocol answers a failed install as text; the remote runtime raises it as the
    local one does, so no caller takes a failure for installed packages."""
    with pytest.raises(InstallError, match="nosuchpkg-contract") as caught:
        await pad.install_packages(["nosuchpkg-contract"])
    assert caught.value.output
    # one wording whatever the door: the local failure's own message
    assert str(caught.value).startswith("installing nosuchpkg-contract failed (exit code ")
    assert (await pad.execute("1")).status == "ok"


async def test_stdout_and_stderr_are_separate_and_streamed(pad: ScratchpadRuntime) -> None:
    code = "import sys\nprint('out')\nprint('err', file=sys.stderr)"
    items = [item async for item in pad.execute_streaming(code)]
    assert isinstance(items[-1], Cell)
    assert sum(isinstance(item, Cell) for item in items) == 1
    for stream, text in (("stdout", "out\n"), ("stderr", "err\n")):
        parts = [i.text for i in items if isinstance(i, OutputEvent) and i.stream == stream]
        assert "".join(parts) == text  # how reads split the bytes is the pipe's business
    cell = items[-1]
    assert cell.stdout == "out\n" and cell.stderr == "err\n"


async def test_output_from_c_level_and_child_processes_is_captured(pad: ScratchpadRuntime) -> None:
    code = (
        "import os, subprocess\n"
        "os.write(1, b'raw fd write\\n')\n"
        "subprocess.run(['echo', 'from a child'])\n"
        "os.system('echo from a shell >&2')"
    )
    cell = await pad.execute(code)
    assert "raw fd write\n" in cell.stdout
    assert "from a child\n" in cell.stdout
    assert "from a shell\n" in cell.stderr


async def test_output_streams_while_the_cell_runs(pad: ScratchpadRuntime) -> None:
    code = "import time\nprint('early')\ntime.sleep(1.5)\nprint('late')"
    stream = pad.execute_streaming(code)
    first = await asyncio.wait_for(anext(stream), timeout=1.0)  # before the sleep ends
    assert first == OutputEvent("stdout", "early\n")
    rest = [item async for item in stream]
    assert isinstance(rest[-1], Cell) and rest[-1].stdout == "early\nlate\n"


async def test_progress_is_streamed_and_logged(pad: ScratchpadRuntime) -> None:
    items = [item async for item in pad.execute_streaming("progress('loading')\nprogress(2)")]
    progress = [item.message for item in items if isinstance(item, ProgressEvent)]
    assert progress == ["loading", "2"]
    cell = items[-1]
    assert isinstance(cell, Cell) and "loading" in cell.logs


INTERLEAVED = (
    "import os, sys\n"
    "for i in range(20):\n"
    "    print(f'line {i}')\n"
    "    progress(f'step {i}')\n"
    "    print(f'err {i}', file=sys.stderr)\n"
    "    display(f'shown {i}')\n"
    "os.system('echo from a shell')\n"  # output the kernel's counts miss
    "print('after the shell')\n"
    "progress('last')\n"
    "print('end')"
)


async def test_output_progress_and_displays_come_in_the_order_the_cell_made_them(
    pad: ScratchpadRuntime,
) -> None:
    said: list[str] = []
    async for item in pad.execute_streaming(INTERLEAVED):
        if isinstance(item, OutputEvent):
            said += [f"{item.stream}: {line}" for line in item.text.splitlines()]
        elif isinstance(item, ProgressEvent):
            said.append(f"progress: {item.message}")
        elif isinstance(item, DisplayEvent):
            said.append(f"display: {item.data['text/plain']}")
    made = [
        line
        for i in range(20)
        for line in (f"stdout: line {i}", f"progress: step {i}", f"stderr: err {i}",
                     f"display: 'shown {i}'")
    ]  # fmt: skip
    assert said[: len(made)] == made
    # After output the kernel's counts miss (a shell's, written straight to the descriptor),
    # where later progress falls among the lines depends on how the pipe was read: lines
    # stay whole and nothing is lost, the order of this tail is not promised.
    assert sorted(said[len(made) :]) == sorted(
        ["stdout: from a shell", "stdout: after the shell", "progress: last", "stdout: end"]
    )


async def test_display_sends_rich_bundles(pad: ScratchpadRuntime) -> None:
    code = (
        "class Card:\n"
        "    def _repr_html_(self):\n"
        "        return '<b>card</b>'\n"
        "    def __repr__(self):\n"
        "        return 'Card()'\n"
        "display(Card(), 'text')"
    )
    items = [item async for item in pad.execute_streaming(code)]
    displays = [item.data for item in items if isinstance(item, DisplayEvent)]
    assert displays[0] == {"text/html": "<b>card</b>", "text/plain": "Card()"}
    assert displays[1] == {"text/plain": "'text'"}
    cell = items[-1]
    assert isinstance(cell, Cell) and cell.outputs == displays


async def test_matplotlib_figures_become_png_outputs(pad: ScratchpadRuntime) -> None:
    pytest.importorskip("matplotlib")
    shown = await pad.execute("import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()")
    assert shown.status == "ok", shown.error
    assert len(shown.outputs) == 1
    png = shown.outputs[0]["image/png"]
    assert png.startswith("iVBORw0KGgo")  # base64 of the PNG signature
    left_open = await pad.execute("fig = plt.figure()\n_ = plt.bar([1], [2])")
    assert [list(o) for o in left_open.outputs] == [["image/png", "text/plain"]]
    nothing = await pad.execute("1")
    assert nothing.outputs == []


async def test_top_level_await_works(pad: ScratchpadRuntime) -> None:
    cell = await pad.execute(
        "import asyncio\nawait asyncio.sleep(0)\nawait asyncio.sleep(0, 'done')"
    )
    assert cell.status == "ok", cell.error
    assert cell.result == "'done'"


async def test_input_fails_at_once(pad: ScratchpadRuntime) -> None:
    cell = await pad.execute("input('name? ')")
    assert cell.status == "error"
    assert cell.error is not None and "EOFError" in cell.error and "stdin is closed" in cell.error


async def test_sample_helper_prints_a_typed_view(pad: ScratchpadRuntime) -> None:
    cell = await pad.execute("sample({'a': 1, 'b': [1, 2]})")
    assert cell.stdout.startswith("dict of 2 keys")
    assert "'b': list = [1, 2]" in cell.stdout


async def test_cancel_interrupts_and_keeps_state(pad: ScratchpadRuntime) -> None:
    await pad.execute("counter = 0")
    task = asyncio.create_task(pad.execute("while True:\n    counter += 1"))
    await wait_until_busy(pad)
    await pad.cancel()  # at once: the interrupt waits until the kernel entered the cell
    cell = await task
    assert cell.status == "cancelled"
    assert cell.error is not None and cell.error.startswith("Cell cancelled (interrupted")
    assert "KeyboardInterrupt" in cell.error
    after = await pad.execute("counter > 0")
    assert after.result == "True"


async def test_reset_clears_variables_and_cells(pad: ScratchpadRuntime) -> None:
    await pad.execute("gone = 1")
    await pad.reset()
    assert pad.cells == []
    cell = await pad.execute("gone")
    assert cell.status == "error" and "NameError" in (cell.error or "")


async def test_close_then_start_again(pad: ScratchpadRuntime) -> None:
    await pad.execute("value = 1")
    await pad.close()
    with pytest.raises(PadClosedError, match="closed"):
        await pad.execute("1")
    await pad.start()
    cell = await pad.execute("'value' in dir()")
    assert cell.result == "True"  # the new kernel restores the pad's checkpoint


async def test_cleanup_forbids_further_use(pad: ScratchpadRuntime) -> None:
    await pad.cleanup()
    with pytest.raises(PadClosedError):
        await pad.start()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"code": 42}, "code must be a string"),
        ({"code": "1", "estimated_seconds": -1}, "estimated_seconds must be a number"),
        ({"code": "1", "description": None}, "description must be a string"),
    ],
)
async def test_bad_execute_arguments_are_refused(
    pad: ScratchpadRuntime, kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidInputError, match=message):
        await pad.execute(**kwargs)  # type: ignore[arg-type]
    assert (await pad.execute("1 + 1")).result == "2"


async def test_cells_of_one_pad_run_in_order(pad: ScratchpadRuntime) -> None:
    await pad.execute("order = []")
    codes = [f"import time; time.sleep(0.05 * {3 - i}); order.append({i})" for i in range(3)]
    await asyncio.gather(*(pad.execute(code) for code in codes))
    assert (await pad.execute("order")).result == "[0, 1, 2]"


async def test_views_show_the_cells(pad: ScratchpadRuntime) -> None:
    await pad.execute("print('shown')", description="first")
    await pad.execute("1/0", description="second")
    text = pad.view()
    assert "first" in text and "shown" in text and "ZeroDivisionError" in text
    markdown = pad.dump()
    assert "## [2] second" in markdown
    assert "**Error:** `ZeroDivisionError: division by zero`" in markdown
    notebook = pad.to_ipynb()
    assert notebook["nbformat"] == 4
    assert [c["source"] for c in notebook["cells"]] == ["print('shown')", "1/0"]


@pytest.fixture
def workspace_file(workspace: Path) -> Path:
    """A file at the top of the workspace before the pad starts: where the workspace holds
    the home, the sandbox lets a kernel reach only the top-level entries that existed when it
    started (see README, Trust model)."""
    path = workspace / "data.txt"
    path.write_text("from the workspace")
    return path


async def test_kernel_runs_in_the_workspace(
    workspace_file: Path, workspace: Path, pad: ScratchpadRuntime
) -> None:
    cell = await pad.execute("import os\nprint(os.getcwd())\nopen('data.txt').read()")
    assert cell.stdout.strip() == str(workspace)
    assert cell.result == "'from the workspace'"


async def test_kernel_environment(pad: ScratchpadRuntime) -> None:
    cell = await pad.execute(
        "import os, sys\n(os.environ['PYTHONUTF8'], sys.prefix == os.environ['VIRTUAL_ENV'])"
    )
    assert cell.result == "('1', True)"


async def test_cancel_by_id_removes_a_queued_cell_and_interrupts_a_running_one(
    pad: ScratchpadRuntime,
) -> None:
    await pad.execute("ran = []")
    running = asyncio.create_task(
        pad.execute("import time\nwhile True:\n    time.sleep(0.01)", cell_id="long")
    )
    await wait_until_busy(pad)
    queued = asyncio.create_task(pad.execute("ran.append('queued')", cell_id="queued"))
    await asyncio.sleep(0)  # the second submit is queued behind the first
    assert await pad.cancel("queued")
    skipped = await queued
    assert skipped.id == "queued" and skipped.status == "cancelled"
    assert skipped.error is not None and "before it started; nothing ran" in skipped.error
    assert not running.done()  # another cell's cancel never touches this one
    assert await pad.cancel("long")
    stopped = await running
    assert stopped.id == "long" and stopped.status == "cancelled"
    assert (await pad.execute("ran")).result == "[]"
    assert not await pad.cancel("no-such-cell")


async def test_a_repeated_cell_id_gives_the_known_cell_and_never_runs_twice(
    pad: ScratchpadRuntime,
) -> None:
    await pad.execute("count = 0")
    first = await pad.execute("count += 1\ncount", cell_id="once")
    again = await pad.execute("count += 1\ncount", cell_id="once")
    assert first.result == again.result == "1"
    assert again.id == "once"
    assert (await pad.execute("count")).result == "1"


async def test_a_known_cell_id_with_other_code_is_refused(pad: ScratchpadRuntime) -> None:
    await pad.execute("1", cell_id="taken")
    with pytest.raises(InvalidInputError, match="already names a cell with other code"):
        await pad.execute("2", cell_id="taken")


async def test_a_bad_cell_id_is_refused(pad: ScratchpadRuntime) -> None:
    with pytest.raises(InvalidInputError, match="cell id"):
        await pad.execute("1", cell_id="../x")


async def test_reset_stops_the_running_cell_and_says_its_state_was_lost(
    pad: ScratchpadRuntime,
) -> None:
    running = asyncio.create_task(pad.execute("import time\ntime.sleep(30)"))
    await wait_until_busy(pad)
    await pad.reset()
    cell = await running
    assert cell.status == "killed"
    assert cell.error is not None
    assert cell.error.startswith("Cell stopped: the pad was reset while it ran")
    assert "variables were lost" in cell.error and "kept" not in cell.error


async def test_lone_surrogates_anywhere_become_replacement_characters(
    pad: ScratchpadRuntime,
) -> None:
    lone = "\ud800"
    code = f"progress({lone!r})\nprint({lone!r})\ndisplay({lone!r})\nraise ValueError({lone!r})"
    items = [item async for item in pad.execute_streaming(code, description=f"d{lone}")]
    cell = items[-1]
    assert isinstance(cell, Cell) and cell.status == "error"  # it ran, and says so
    for text in (cell.error, cell.logs, cell.description, cell.code, json.dumps(cell.outputs)):
        assert text is not None
        text.encode("utf-8")  # valid UTF-8 everywhere
    assert "ValueError: \ufffd" in (cell.error or "") and cell.description == "d\ufffd"
    view = pad.view() + pad.dump() + json.dumps(pad.to_ipynb(), ensure_ascii=False)
    view.encode("utf-8")
    assert (await pad.execute("1")).result == "1"


@pytest.mark.parametrize("name", ["my pad", "données", "data/analysis"])
async def test_names_beyond_plain_ones_work(backend: ScratchpadManager, name: str) -> None:
    other = await backend.get_or_create(name)
    assert (await other.execute("6 * 7")).result == "42"
    assert [cell.result for cell in await other.load_cells()][-1] == "42"


async def test_each_cell_has_its_number_in_the_pad_everywhere(pad: ScratchpadRuntime) -> None:
    cells = [await pad.execute(code) for code in ("a = 1", "b = 2", "def f():\n    1/0\nf()")]
    assert [cell.number for cell in cells] == [1, 2, 3]
    assert 'File "<cell 3>", line 3' in (cells[2].error or "")  # its traceback names it
    await pad.load_cells()
    assert [cell.number for cell in pad.cells] == [1, 2, 3]
    assert "--- [3] cell (error" in pad.view()
    assert "## [3] Cell" in pad.dump()
    notebook = pad.to_ipynb()
    assert [cell["execution_count"] for cell in notebook["cells"]] == [1, 2, 3]
    assert notebook["cells"][2]["metadata"]["tags"] == ["raises-exception"]


async def test_numbers_go_on_across_kernels_and_start_again_after_reset(
    pad: ScratchpadRuntime,
) -> None:
    await pad.execute("1")
    await pad.close()
    await pad.start()
    again = await pad.execute("1/0")
    assert again.number == 2 and "<cell 2>" in (again.error or "")
    repeat = await pad.execute("1/0", cell_id=again.id)  # a known cell keeps its number
    assert repeat.number == 2
    await pad.reset()
    assert (await pad.execute("1")).number == 1


async def test_a_rich_result_carries_its_mime_bundle(pad: ScratchpadRuntime) -> None:
    code = (
        "class Table:\n"
        "    def _repr_html_(self):\n"
        "        return '<table><tr><td>1</td></tr></table>'\n"
        "    def __repr__(self):\n"
        "        return 'Table(1)'\n"
        "Table()"
    )
    cell = await pad.execute(code)
    assert cell.result == "Table(1)"
    assert cell.result_data == {"text/html": "<table><tr><td>1</td></tr></table>"}
    assert (await pad.execute("41 + 1")).result_data == {}
    broken = await pad.execute(
        "class Odd:\n    def _repr_mimebundle_(self):\n        return ({'a': 1}, {}), 2\n"
        "    def __repr__(self):\n        return 'Odd()'\nOdd()"
    )
    assert (broken.status, broken.result, broken.result_data) == ("ok", "Odd()", {})
    await pad.load_cells()
    (result,) = pad.to_ipynb()["cells"][0]["outputs"]
    assert result["data"]["text/html"] == cell.result_data["text/html"]
