"""What of a stored stream the terminal still has to show after streaming (output.unseen_rest)."""

from __future__ import annotations

from scratchpad.cli.output import unseen_rest
from scratchpad.runtime.cell import CappedOutput

NOTE = "\n[... 10 bytes of output dropped (kept the first and last part) ...]\n"


def capped(data: bytes, cap: int) -> tuple[str, str]:
    """(stored text, streamed text) of one stream, as the runtime makes them."""
    output = CappedOutput(cap)
    streamed = "".join(output.append(data[i : i + 100]) or "" for i in range(0, len(data), 100))
    return output.text(), streamed


def test_nothing_is_left_when_everything_was_streamed() -> None:
    stored, streamed = capped(b"x" * 500, 1024)
    assert unseen_rest(stored, streamed) == ""


def test_the_tail_past_the_head_is_left_when_nothing_was_dropped() -> None:
    stored, streamed = capped(b"x" * 900, 1024)
    assert streamed == "x" * 512 and unseen_rest(stored, streamed) == "x" * 388


def test_the_note_and_the_tail_are_left_when_the_middle_was_dropped() -> None:
    stored, streamed = capped(b"h" * 512 + b"m" * 3000 + b"t" * 512, 1024)
    rest = unseen_rest(stored, streamed)
    assert rest.startswith("\n[... 3000 bytes of output dropped") and rest.endswith("t" * 512)
    assert streamed + rest == stored


def test_a_stream_that_disagrees_with_the_stored_text_shows_only_note_and_tail() -> None:
    assert unseen_rest("head" + NOTE + "tail", "other") == NOTE + "tail"
    assert unseen_rest("stored", "other") == ""  # never repeat what may have been shown
