"""In-pad helpers: sample() views per type, rich bundles, and a small idle kernel."""

from __future__ import annotations

from pathlib import Path

import pytest

from scratchpad.config import Settings
from scratchpad.runtime.base import ScratchpadRuntime
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.scrub import register


async def sample_of(pad: ScratchpadRuntime, setup: str, mode: str = "preview") -> str:
    cell = await pad.execute(f"{setup}\nsample(value, {mode!r})")
    assert cell.status == "ok", cell.error
    return cell.stdout


async def test_idle_kernel_imports_nothing_heavy(pad: ScratchpadRuntime) -> None:
    cell = await pad.execute(
        "import sys\n"
        "sorted(m for m in ('scratchpad', '_scratchpad_helpers', 'matplotlib', 'numpy', "
        "'asyncio', 'linecache') if m in sys.modules)"
    )
    assert cell.result == "[]"


async def test_sample_of_builtin_types(pad: ScratchpadRuntime) -> None:
    assert (await sample_of(pad, "value = [1, 'a', 2.5]")).startswith(
        "list of 3 items (types: float, int, str)"
    )
    assert (await sample_of(pad, "value = (1, 2)")).startswith("tuple of 2 items")
    assert (await sample_of(pad, "value = {3, 1, 2}")).startswith("set of 3 items: {1, 2, 3}")
    assert (await sample_of(pad, "value = 'abc'")) == "str of 3 chars:\nabc\n"
    assert (await sample_of(pad, "value = b'\\x00ab'")) == "bytes of 3 bytes: b'\\x00ab'\n"
    other = await sample_of(
        pad, "class Point:\n    def __repr__(self): return 'P'\nvalue = Point()"
    )
    assert other == "__main__.Point: P\n"


async def test_sample_caps_preview_and_full(pad: ScratchpadRuntime) -> None:
    preview = await sample_of(pad, "value = {i: 'x' * 200 for i in range(100)}")
    assert "... 80 more keys" in preview
    long_text = await sample_of(pad, "value = 'z' * 50000", "full")
    assert len(long_text) < 10_200
    assert "more characters; sample(x, 'full')" in long_text
    short = await sample_of(pad, "value = 'z' * 50000")
    assert len(short) < 2_200


async def test_sample_rejects_unknown_modes(pad: ScratchpadRuntime) -> None:
    cell = await pad.execute("sample(1, 'everything')")
    assert cell.status == "error"
    assert "mode must be 'preview' or 'full'" in (cell.error or "")


async def test_sample_of_numpy_and_pandas(pad: ScratchpadRuntime) -> None:
    pytest.importorskip("numpy")
    pytest.importorskip("pandas")
    array = await sample_of(pad, "import numpy as np\nvalue = np.arange(10.0)")
    assert array.startswith("ndarray shape=(10,) dtype=float64 min=0.0 max=9.0 mean=4.5")
    frame = await sample_of(
        pad, "import pandas as pd\nvalue = pd.DataFrame({'a': range(100), 'b': ['x'] * 100})"
    )
    assert frame.startswith("DataFrame 100 rows × 2 columns\ndtypes: a: int64, b: ")
    assert len(frame.splitlines()) == 2 + 6  # header line + 5 rows
    series = await sample_of(pad, "value = pd.Series([1, 2, 3], name='s')")
    assert series.startswith("Series 's', 3 values, dtype int64")


async def test_display_of_a_dataframe_has_html(pad: ScratchpadRuntime) -> None:
    pytest.importorskip("pandas")
    cell = await pad.execute("import pandas as pd\ndisplay(pd.DataFrame({'a': [1]}))")
    assert cell.status == "ok", cell.error
    assert "<table" in cell.outputs[0]["text/html"]
    assert "text/plain" in cell.outputs[0]


async def test_a_dataframe_result_carries_html_scrubbed_into_the_notebook(
    pad: ScratchpadRuntime,
) -> None:
    pytest.importorskip("pandas")
    register([("hunter2-long-pw", "DS_DB__PASSWORD")])
    cell = await pad.execute(
        "import pandas as pd\npd.DataFrame({'a': [1], 'b': ['hunter2-long-pw']})"
    )
    assert cell.status == "ok", cell.error
    html = cell.result_data["text/html"]
    assert "<table" in html and "[DS_DB__PASSWORD]" in html and "hunter2" not in html
    assert "text/plain" not in cell.result_data and "[DS_DB__PASSWORD]" in (cell.result or "")
    (result,) = pad.to_ipynb()["cells"][-1]["outputs"]
    assert result["output_type"] == "execute_result"
    assert result["data"] == {"text/html": html, "text/plain": cell.result}


async def test_a_result_too_big_for_the_display_cap_keeps_its_text_and_says_so(
    workspace: Path, settings: Settings
) -> None:
    small = settings.model_copy(update={"display_cap_bytes": 64 * 1024})
    async with ScratchpadManager(workspace=workspace, settings=small) as manager:
        pad = await manager.get_or_create("capped")
        cell = await pad.execute(
            "class Big:\n    def _repr_html_(self):\n        return '<p>' + 'x' * 100_000\n"
            "    def __repr__(self):\n        return 'Big()'\nBig()"
        )
    assert cell.result == "Big()" and cell.result_data == {}
    assert "result: the result's rich forms (text/html, 100003 bytes) were left out" in cell.logs
