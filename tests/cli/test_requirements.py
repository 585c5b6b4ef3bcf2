"""``install -r FILE``: a requirements file read as pip reads its specs, or refused naming
the line that cannot be a pad's."""

from __future__ import annotations

from pathlib import Path

import pytest

from scratchpad.cli.requirements import read_requirements
from scratchpad.errors import InvalidInputError


def test_specs_comments_continuations_and_includes(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "more.txt").write_text("six\n")
    main = tmp_path / "requirements.txt"
    main.write_text(
        "# data tools\n"
        "pandas >= 2  # spaces are dropped\n"
        "\n"
        "requests\\\n"
        "  ==2.31\n"
        "--requirement sub/more.txt\n"
        "-r=sub/more.txt\n"
        "pkg @ https://example.invalid/pkg.whl#sha256=abc\n"
    )
    assert read_requirements(main) == [
        "pandas>=2",
        "requests==2.31",
        "six",  # included twice, installed once
        "pkg@https://example.invalid/pkg.whl#sha256=abc",
    ]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("six\n-e ./local\n", "requirements.txt:2: -e is an installer option"),
        ("--index-url=https://x\n", "requirements.txt:1: --index-url=https://x is an installer"),
        ("six; python_version > '3'\n", "has an environment marker"),
        ("-r requirements.txt\n", "includes itself"),
        ("-r\n", "-r needs a file name"),
        ("-r missing.txt\n", "cannot read"),
    ],
)
def test_what_a_pad_cannot_take_is_refused_naming_the_line(
    tmp_path: Path, text: str, words: str
) -> None:
    path = tmp_path / "requirements.txt"
    path.write_text(text)
    with pytest.raises(InvalidInputError) as caught:
        read_requirements(path)
    assert words in str(caught.value)


def test_a_file_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "requirements.txt"
    path.write_bytes(b"caf\xe9\n")
    with pytest.raises(InvalidInputError, match="not UTF-8"):
        read_requirements(path)
