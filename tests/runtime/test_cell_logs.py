"""``logging`` in a pad: records at INFO and above go to the cell's logs, as in Anton's pads."""

from __future__ import annotations

from scratchpad.runtime.base import ScratchpadRuntime


async def test_log_records_of_a_cell_go_to_its_logs(pad: ScratchpadRuntime) -> None:
    first = await pad.execute("import sys\n'logging' in sys.modules")
    assert first.result == "False"  # not imported at boot: it costs every start
    cell = await pad.execute(
        "import logging\n"
        "logging.getLogger('fetch').info('got %d rows', 3)\n"
        "logging.warning('careful')\n"
        "logging.debug('not this')\n"
        "print('out')"
    )
    assert cell.status == "ok", cell.error
    assert cell.logs.splitlines() == ["INFO fetch: got 3 rows", "WARNING root: careful"]
    assert (cell.stdout, cell.stderr) == ("out\n", "")
    later = await pad.execute("logging.getLogger('x.y').error('again')")
    assert later.logs == "ERROR x.y: again"


async def test_basic_config_still_configures_the_root_logger(pad: ScratchpadRuntime) -> None:
    cell = await pad.execute(
        "import logging, sys\n"
        "logging.basicConfig(stream=sys.stdout, format='%(message)s')\n"
        "logging.info('both')"
    )
    assert cell.status == "ok", cell.error
    assert cell.stdout == "both\n"
    assert cell.logs == "INFO root: both"


async def test_records_from_a_thread_go_to_the_cell_running_then(
    pad: ScratchpadRuntime,
) -> None:
    await pad.execute(
        "import logging, threading\n"
        "go = threading.Event()\n"
        "def later():\n"
        "    go.wait()\n"
        "    logging.info('from the thread')\n"
        "threading.Thread(target=later).start()"
    )
    quiet = await pad.execute("go.set()\nimport time\ntime.sleep(0.2)\n'ok'")
    assert quiet.status == "ok", quiet.error
    assert "INFO root: from the thread" in quiet.logs  # it ran during this cell
