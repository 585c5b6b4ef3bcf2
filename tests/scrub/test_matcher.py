"""The scrubber alone: every encoding of a value, streams cut anywhere, key shapes, labels, and
what it must leave alone."""

from __future__ import annotations

import base64
import json
from urllib.parse import quote

from hypothesis import given, settings
from hypothesis import strategies as st

from scratchpad.scrub import REDACTED, Scrubber, scrub_bundle, scrubber
from tests.scrub.corpus import CONTROL_LINES, UNKNOWN_KEYS, leak_probes, printed_forms

SECRET = 'Zq9/p@ss"w0rd+\\x'


def known() -> Scrubber:
    scrub = Scrubber()
    scrub.add(SECRET, "DS_PG_PROD__PASSWORD")
    return scrub


def test_every_printed_form_of_a_value_is_replaced_by_its_variable() -> None:
    scrub = known()
    for form in printed_forms(SECRET):
        out = scrub.scrub(f"before {form} after")
        assert not [probe for probe in leak_probes(SECRET) if probe in out], (form, out)
        assert "[DS_PG_PROD__PASSWORD]" in out


def test_base64_after_other_bytes_is_caught_at_every_alignment() -> None:
    scrub = known()
    for lead in (b"", b"a", b"ab", b"abc", b"user:", b"Authorization: Basic "):
        encoded = base64.b64encode(lead + SECRET.encode()).decode()
        assert "[DS_PG_PROD__PASSWORD]" in scrub.scrub(encoded), lead


def test_multi_line_values_are_caught_line_by_line() -> None:
    scrub = Scrubber()
    scrub.add("-----BEGIN KEY-----\nMIIBOgIBAAJBAKj34GkxFhD90\n-----END KEY-----", "DS_K__KEY")
    assert scrub.scrub("line: MIIBOgIBAAJBAKj34GkxFhD90") == "line: [DS_K__KEY]"


def test_unknown_key_shapes_are_redacted_but_not_inside_longer_words() -> None:
    scrub = Scrubber()
    for key in UNKNOWN_KEYS:
        assert scrub.scrub(f"key={key};") == f"key={REDACTED};", key
    assert scrub.scrub("task-sk-" + "a" * 30) == "task-sk-" + "a" * 30


def test_a_known_value_shaped_like_a_key_is_named_by_its_variable() -> None:
    scrub = Scrubber()
    for number, key in enumerate(UNKNOWN_KEYS):
        scrub.add(key, f"DS_API_{number}__KEY")
    for number, key in enumerate(UNKNOWN_KEYS):
        for form in printed_forms(key):
            out = scrub.scrub(f"key={form};")
            assert f"[DS_API_{number}__KEY]" in out and REDACTED not in out, (form, out)
    stream = scrub.stream()  # as a cell's stdout scrubs it
    streamed = stream.feed(f"key={UNKNOWN_KEYS[0]}\n") + stream.flush()
    assert streamed == "key=[DS_API_0__KEY]\n"


def test_ordinary_text_is_left_alone() -> None:
    scrub = known()
    for line in CONTROL_LINES:
        assert scrub.scrub(line) == line


def test_short_values_are_refused_and_named_labels_win() -> None:
    scrub = Scrubber()
    assert scrub.add("abc12") is False
    assert scrub.scrub("abc12 stays") == "abc12 stays"
    scrub.add("shared-value-1")
    scrub.add("shared-value-1", "DS_A__TOKEN")
    assert scrub.scrub("shared-value-1") == "[DS_A__TOKEN]"


def test_a_lasting_name_replaces_a_provisional_one_and_never_the_reverse() -> None:
    """A value under test is named as its probe sees it until it is saved as a pad's
    variable; lasting names never replace each other (the first stays)."""
    scrub = Scrubber()
    value = "tested-value-42"
    scrub.add_many({value: "DS_API_KEY"}, provisional=True)
    assert scrub.scrub(f"k={value}") == "k=[DS_API_KEY]"
    scrub.add_many({value: "DS_HTTP_1__API_KEY"})
    assert scrub.scrub(f"k={value}") == "k=[DS_HTTP_1__API_KEY]"
    encoded = base64.b64encode(value.encode()).decode()
    assert scrub.scrub(encoded) == "[DS_HTTP_1__API_KEY]"  # every form renamed
    scrub.add_many({value: "DS_API_KEY"}, provisional=True)  # tested again once saved
    scrub.add_many({value: "DS_HTTP_2__API_KEY"})  # saved twice
    assert scrub.scrub(value) == "[DS_HTTP_1__API_KEY]"


def test_data_and_bundles() -> None:
    scrub = known()
    data = {"k": [SECRET, {SECRET: 1}], "n": 3}
    assert scrub.scrub_data(data) == {
        "k": ["[DS_PG_PROD__PASSWORD]", {"[DS_PG_PROD__PASSWORD]": 1}],
        "n": 3,
    }
    scrubber().add(SECRET, "DS_PG_PROD__PASSWORD")
    image = base64.b64encode(SECRET.encode()).decode()  # base64 images are not text
    bundle = scrub_bundle({"text/plain": SECRET, "image/jpeg": image})
    assert bundle == {"text/plain": "[DS_PG_PROD__PASSWORD]", "image/jpeg": image}


def test_a_stream_cut_anywhere_leaks_nothing() -> None:
    scrub = known()
    text = f"a {SECRET} b {quote(SECRET, safe='')} c {json.dumps(SECRET)} {UNKNOWN_KEYS[0]}\n"
    for cut in range(1, len(text)):
        stream = scrub.stream()
        out = stream.feed(text[:cut]) + stream.feed(text[cut:]) + stream.flush()
        assert out == scrub.scrub(text), cut


@settings(max_examples=200, deadline=None)
@given(
    secret=st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=6),
    before=st.text(max_size=20),
    after=st.text(max_size=20),
    cuts=st.lists(st.integers(min_value=0, max_value=80), max_size=6),
)
def test_any_secret_in_any_stream_is_caught(
    secret: str, before: str, after: str, cuts: list[int]
) -> None:
    scrub = Scrubber()
    if not scrub.add(secret, "DS_X__S"):
        return
    text = before + secret + after
    stream = scrub.stream()
    out, at = [], 0
    for cut in sorted({min(c, len(text)) for c in cuts}):
        out.append(stream.feed(text[at:cut]))
        at = cut
    out.append(stream.feed(text[at:]))
    out.append(stream.flush())
    assert secret.strip() not in "".join(out)


def test_a_secret_as_long_as_the_vault_allows_is_caught_split_across_chunks() -> None:
    """Holding back a possible start must not cost memory per prefix (a 64 KiB value has
    billions of prefix characters over its forms)."""
    from scratchpad.vault.records import MAX_VALUE_CHARS

    value = ("k3y-" * MAX_VALUE_CHARS)[:MAX_VALUE_CHARS]
    scrub = Scrubber()
    scrub.add(value, "DS_BIG__KEY")
    stream = scrub.stream()
    half = len(value) // 2
    out = stream.feed("a " + value[:half]) + stream.feed(value[half:] + " b") + stream.flush()
    assert out == "a [DS_BIG__KEY] b"
