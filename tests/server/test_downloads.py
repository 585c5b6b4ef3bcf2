"""Downloads of a real server (a workspace file, a pad's notebook and markdown) answer as
HTTP caches and resuming clients expect: ETag and Last-Modified, 304 to a current copy, one
byte range (206, 416), HEAD; and an upload to a pad not made yet makes it."""

from __future__ import annotations

from collections.abc import Iterator
from email.utils import formatdate

import httpx
import pytest

from tests.server_helpers import running_server

KEY = "test-key"
DATA = bytes(range(256)) * 4  # 1024 bytes
FILE = "/v1/pads/fresh/files/data/blob.bin"


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    """A client of a real server whose pad ``fresh`` was made by uploading a file to it."""
    root = tmp_path_factory.mktemp("downloads")
    with running_server(root / "home", root, KEY) as (url, _):
        headers = {"Authorization": f"Bearer {KEY}"}
        with httpx.Client(base_url=url, headers=headers, timeout=120) as client:
            assert client.get("/v1/pads/fresh").status_code == 404
            put = client.put(FILE, content=DATA)
            assert put.status_code == 201, put.text
            yield client


def test_an_upload_makes_the_pad_it_names(http: httpx.Client) -> None:
    assert http.get("/v1/pads/fresh").status_code == 200
    assert "fresh" in [pad["name"] for pad in http.get("/v1/pads").json()["pads"]]
    listed = http.get("/v1/pads/fresh/files", params={"path": "data"}).json()
    assert [entry["name"] for entry in listed["entries"]] == ["blob.bin"]


def test_a_file_says_its_version_and_answers_a_current_copy_with_304(
    http: httpx.Client,
) -> None:
    whole = http.get(FILE)
    assert whole.status_code == 200 and whole.content == DATA
    etag, modified = whole.headers["etag"], whole.headers["last-modified"]
    assert etag.startswith('"') and whole.headers["accept-ranges"] == "bytes"
    for condition in ({"If-None-Match": etag}, {"If-None-Match": f'"x", W/{etag}'}):
        same = http.get(FILE, headers=condition)
        assert same.status_code == 304 and same.content == b""
        assert same.headers["etag"] == etag
    assert http.get(FILE, headers={"If-Modified-Since": modified}).status_code == 304
    old = formatdate(0, usegmt=True)
    assert http.get(FILE, headers={"If-Modified-Since": old}).status_code == 200
    assert http.get(FILE, headers={"If-None-Match": '"other"'}).status_code == 200
    assert http.put(FILE, content=DATA[::-1]).status_code == 200
    changed = http.get(FILE, headers={"If-None-Match": etag})
    assert changed.status_code == 200 and changed.content == DATA[::-1]
    assert changed.headers["etag"] != etag
    assert http.put(FILE, content=DATA).status_code == 200


@pytest.mark.parametrize(
    ("spec", "first", "last"),
    [("bytes=2-5", 2, 5), ("bytes=1000-", 1000, 1023), ("bytes=-4", 1020, 1023),
     ("bytes=1020-5000", 1020, 1023), ("bytes=0-0", 0, 0)],
)  # fmt: skip
def test_one_byte_range_answers_206(http: httpx.Client, spec: str, first: int, last: int) -> None:
    part = http.get(FILE, headers={"Range": spec})
    assert part.status_code == 206, part.text
    assert part.content == DATA[first : last + 1]
    assert part.headers["content-range"] == f"bytes {first}-{last}/{len(DATA)}"
    assert part.headers["content-length"] == str(last - first + 1)


def test_ranges_past_the_end_several_or_stale_are_answered_as_the_rfc_says(
    http: httpx.Client,
) -> None:
    past = http.get(FILE, headers={"Range": "bytes=1024-"})
    assert past.status_code == 416 and past.headers["content-range"] == "bytes */1024"
    assert past.json()["type"] == "InvalidInputError" and "1024 bytes" in past.json()["error"]
    for ignored in ("bytes=0-1,5-6", "lines=1-2", "bytes=5-2"):
        whole = http.get(FILE, headers={"Range": ignored})
        assert whole.status_code == 200 and whole.content == DATA, ignored
    etag = http.get(FILE).headers["etag"]
    fresh = http.get(FILE, headers={"Range": "bytes=0-1", "If-Range": etag})
    assert fresh.status_code == 206 and fresh.content == DATA[:2]
    stale = http.get(FILE, headers={"Range": "bytes=0-1", "If-Range": '"old"'})
    assert stale.status_code == 200 and stale.content == DATA


def test_head_answers_the_headers_of_get_without_the_bytes(http: httpx.Client) -> None:
    get, head = http.get(FILE), http.head(FILE)
    assert head.status_code == 200 and head.content == b""
    for name in ("etag", "last-modified", "content-length", "content-type", "accept-ranges"):
        assert head.headers[name] == get.headers[name], name
    assert http.head("/v1/pads/fresh/files/nothing.txt").status_code == 404


@pytest.mark.parametrize("export", ["notebook", "dump"])
def test_a_pads_exports_are_conditional_and_ranged(http: httpx.Client, export: str) -> None:
    ran = http.post("/scratchpad/execute-stream", json={"name": "fresh", "code": "6 * 7"})
    assert ran.status_code == 200 and '"cell"' in ran.text
    path = f"/v1/pads/fresh/{export}"
    whole = http.get(path)
    assert whole.status_code == 200 and whole.headers["accept-ranges"] == "bytes"
    etag = whole.headers["etag"]
    assert "last-modified" in whole.headers
    again = http.get(path)  # a strong ETag: the same bytes, and only they, share it
    same = again.content == whole.content
    assert same or export == "notebook"  # (nbformat may draw new cell ids per export)
    assert (again.headers["etag"] == etag) == same
    current = http.get(path, headers={"If-None-Match": again.headers["etag"]})
    assert current.status_code == (304 if same else 200)
    part = http.get(path, headers={"Range": "bytes=0-9"})
    assert part.status_code == 206 and part.content == whole.content[:10]
    head = http.head(path)
    assert head.status_code == 200 and head.content == b""
    assert head.headers["content-length"] == str(len(whole.content))
    assert head.headers["etag"] == etag or not same
