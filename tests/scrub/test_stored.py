"""Stored JSON text scrubbed again: line files streamed, only changed files rewritten, values
scrubbed inside JSON."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from scratchpad.scrub import scrubber
from scratchpad.scrub.stored import rescrub_lines, scrub_json_text

SECRET = 'pa"ss\\w0rd-Zq9'  # JSON and repr escape it
NAME = "DS_X__PASSWORD"
LABEL = f"[{NAME}]"


def test_lines_are_streamed_and_only_changed_files_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    ordinary = json.dumps({"text": "nothing secret\nat all"}) + "\n"
    path.write_text(ordinary * 3 + '{"torn": "pa"ss')
    os.chmod(path, 0o640)
    scrubber().add(SECRET, NAME)
    assert not rescrub_lines(path, scrubber())  # a torn line without the secret stays as it is
    path.write_text(ordinary + json.dumps({"t": SECRET}) + "\n" + '{"torn": "' + SECRET)
    os.chmod(path, 0o640)
    assert rescrub_lines(path, scrubber())
    assert path.read_text() == ordinary + json.dumps({"t": LABEL}, ensure_ascii=False) + "\n" + (
        '{"torn": "' + LABEL
    )
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


@pytest.mark.parametrize(
    "value",
    [
        "no secrets here",
        {"stdout": "first line\nsk-proj-" + "a" * 30},  # a key shape after an escaped newline
        {"code": f"x = {SECRET!r}", "ids": [1, 2.5, None, True]},
    ],
)
def test_json_text_is_scrubbed_by_value(value: object) -> None:
    scrubber().add(SECRET, NAME)
    text = json.dumps(value, ensure_ascii=False)
    scrubbed = scrub_json_text(text, scrubber())
    assert json.loads(scrubbed) == scrubber().scrub_data(value)
    if json.loads(scrubbed) == value:
        assert scrubbed is text
