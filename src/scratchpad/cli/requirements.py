"""``scratchpad install -r FILE``: the package specs of a requirements file, read on this side
(the server only ever gets specs, checked by the core as any others are)."""

from __future__ import annotations

from pathlib import Path

from scratchpad.errors import InvalidInputError

INCLUDE = ("-r", "--requirement")


def read_requirements(path: Path) -> list[str]:
    """The specs of ``path`` in order: comments, blank lines and line continuations as pip
    reads them, ``-r OTHER`` included (relative to the file). Any other option (``-e``,
    ``--index-url``, ``--hash``) or an environment marker is refused, naming the line."""
    return list(dict.fromkeys(_read(path, including=())))  # a spec twice: installed once


def _read(path: Path, including: tuple[Path, ...]) -> list[str]:
    """The specs of ``path``, read while the files ``including`` include it."""
    where = path.resolve()
    if where in including:
        raise InvalidInputError(f"{path} includes itself (through -r); remove the loop")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InvalidInputError(f"{path} is not UTF-8 text; save it as UTF-8") from None
    except OSError as exc:
        raise InvalidInputError(
            f"cannot read {path}: {exc.strerror}; give a readable requirements file"
        ) from None
    specs: list[str] = []
    for number, line in _logical_lines(text):
        words = line.split()
        if words[0] in INCLUDE or words[0].startswith(("-r=", "--requirement=")):
            target = words[1] if len(words) > 1 else words[0].partition("=")[2]
            if not target:
                raise InvalidInputError(f"{path}:{number}: -r needs a file name")
            specs += _read(path.parent / target, (*including, where))
        elif line.startswith("-"):
            raise InvalidInputError(
                f"{path}:{number}: {words[0]} is an installer option, which a pad does not "
                "take; keep only package specs (name, version, URL or path) in the file"
            )
        elif ";" in line:
            raise InvalidInputError(
                f"{path}:{number}: {line!r} has an environment marker; give the plain spec "
                "for this pad's Python"
            )
        else:
            specs.append("".join(words))  # 'pandas >= 2' is 'pandas>=2'
    return specs


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, text) of each non-empty line, comments removed and lines ending
    in a backslash joined to the next."""
    lines: list[tuple[int, str]] = []
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = "" if raw.lstrip().startswith("#") else raw
        line = line.split(" #", 1)[0].split("\t#", 1)[0]
        if not pending:
            start = number
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        line, pending = (pending + line).strip(), ""
        if line:
            lines.append((start, line))
    if pending.strip():
        lines.append((start, pending.strip()))
    return lines
