"""A pad's workspace files over HTTP: list a directory, download, upload, delete.

The web UI lives on the same origin and keeps its tab's session there, so a workspace file must
never run as a page of it: every download says ``nosniff`` and a sandboxing CSP, and everything
but raster images and plain text comes as an attachment. A browser fetches a download through
a signed URL (``POST /v1/signed-urls``), as a link cannot carry the session's header. Uploads
stream to a temp file beside their target with their own size limit
(``SCRATCHPAD_MAX_UPLOAD_BYTES``): the Guard does not buffer them (see :func:`upload_limit`).
Disk work runs on worker threads. Downloads answer HEAD, ``ETag`` / ``Last-Modified`` with
304 to a current copy, and one byte range (206, 416): see :mod:`scratchpad.server.conditional`.
An upload to a pad that does not exist yet makes it, as running a cell there would. The models
of the JSON answers are here (a listing's entries as runtime/files.py describes them).
"""

from __future__ import annotations

import asyncio
import mimetypes
import os
import re
from collections.abc import Callable
from typing import Annotated, Any, Literal

from fastapi import FastAPI, Path, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field
from starlette.requests import ClientDisconnect
from starlette.types import Receive, Scope, Send

from scratchpad.config import Settings
from scratchpad.runtime.files import Upload, Workspace, workspace
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.server.conditional import (
    LAST_MODIFIED,
    VALIDATOR_HEADERS,
    Plan,
    Validators,
    documented,
    plan,
    special,
)
from scratchpad.server.guard import error, segment_name
from scratchpad.server.headers import content_disposition
from scratchpad.server.openapi import DISPOSITION, answers, raw_body
from scratchpad.server.schemas import PadPath
from scratchpad.wire import wire

READ_CHUNK = 256 * 1024
WRITE_BATCH = 1024 * 1024  # received bytes written to disk at a time
INLINE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp", "text/plain"})
SAFE_HEADERS = {
    "x-content-type-options": "nosniff",
    "content-security-policy": "sandbox; default-src 'none'",
    "cache-control": "no-store",
}
UPLOAD_PATH = re.compile(r"/v1/pads/[^/]+/files/.")
FilePath = Annotated[
    str, Path(description="A path relative to the workspace, '/'-separated (e.g. data/out.csv).")
]
DirPath = Annotated[str, Query(description="The directory to list, relative to the workspace.")]
Download = Annotated[bool, Query(description="true: always as an attachment.")]
ANY_FILE = {"type": "string", "format": "binary"}
DOWNLOAD_HEADERS = {  # name: (description, schema)
    "content-disposition": (
        "`attachment` (`inline` for PNG, JPEG, GIF and WebP images and plain text, unless "
        "download=true) with the file's name: an ASCII stand-in, then in UTF-8 (RFC 6266).",
        DISPOSITION,
    ),
    "content-length": ("The file's size in bytes.", {"type": "string", "pattern": "^[0-9]+$"}),
    **{
        name: (
            "Always this: the file never runs as a page here.",
            {"type": "string", "const": value},
        )
        for name, value in SAFE_HEADERS.items()
    },
}


class FileEntry(BaseModel):
    name: str
    path: str = Field(description="Relative to the workspace, '/'-separated.")
    type: Literal["dir", "file"]
    size: int | None = Field(description="Bytes (files only).")
    modified: str = Field(description="ISO 8601, UTC (e.g. 2025-01-31T12:00:00Z).")


class FileList(BaseModel):
    """One directory level: directories first, then files, by name."""

    pad: str
    path: str = Field(description="The directory listed ('' for the top).")
    entries: list[FileEntry]
    truncated: bool = Field(description="More entries were there than the 1000 listed.")


class FileWritten(BaseModel):
    path: str = Field(description="The file's clean path.")
    size: int = Field(description="Bytes written.")


class FileDeleted(BaseModel):
    deleted: str = Field(description="The clean path of what was deleted.")


def upload_limit(settings: Settings) -> Callable[[Scope], int | None]:
    """For the Guard: the body limit of a request that streams its own body (an upload),
    None for the others."""

    def limit(scope: Scope) -> int | None:
        is_upload = scope.get("method") == "PUT" and UPLOAD_PATH.match(scope["path"])
        return settings.max_upload_bytes if is_upload else None

    return limit


DOWNLOAD = answers(
    ANY_FILE,
    400,
    404,
    409,
    416,
    422,
    media_type=("application/octet-stream", "*/*"),
    description="The file's bytes (HEAD: its headers only). Its media type is guessed from "
    "its name (text types with charset=utf-8; application/octet-stream when unknown).",
    headers={
        **{
            name: {"description": text, "schema": schema}
            for name, (text, schema) in DOWNLOAD_HEADERS.items()
        },
        **VALIDATOR_HEADERS,
        **LAST_MODIFIED,
    },
)
DOWNLOAD["responses"].update(documented(DOWNLOAD["responses"][200]["content"], LAST_MODIFIED))
UPLOAD = {
    **answers(
        FileWritten,
        400,
        404,
        409,
        413,
        503,
        description="Replaced.",
        also={201: "Created (and the pad, when it did not exist: as running a cell makes it)."},
    ),
    "openapi_extra": raw_body("The file's bytes, as they are (any type; no multipart)."),
}


def files_routes(app: FastAPI, manager: ScratchpadManager) -> None:
    async def files_of(name: str) -> Workspace:
        return await asyncio.to_thread(workspace, manager, segment_name(name))

    @app.get("/v1/pads/{name}/files", **answers(FileList, 400, 404, 409))
    async def list_files(name: PadPath, path: DirPath = "") -> dict[str, Any]:
        """One directory of the pad's workspace (the Scratchpad home never shows)."""
        files = await files_of(name)
        listing = await asyncio.to_thread(files.listing, path)
        return wire(FileList.model_validate({"pad": segment_name(name), **listing}))

    @app.head("/v1/pads/{name}/files/{path:path}", **DOWNLOAD)
    @app.get("/v1/pads/{name}/files/{path:path}", **DOWNLOAD)
    async def get_file(
        name: PadPath, path: FilePath, request: Request, download: Download = False
    ) -> Response:
        """A file's bytes, never runnable as a page of this origin."""
        files = await files_of(name)
        path = segment_name(path)
        fd, size = await asyncio.to_thread(files.open_file, path)
        try:
            version = Validators.of_file(await asyncio.to_thread(os.fstat, fd))
            media_type, headers = _content_headers(path, download)
            decided = plan(request.headers, request.method, size, version)
        except BaseException:
            os.close(fd)
            raise
        if decided.status in (304, 416):
            os.close(fd)
            return special(decided, headers, size)
        return DescriptorResponse(fd, decided, media_type, headers)

    @app.put("/v1/pads/{name}/files/{path:path}", **UPLOAD)
    async def put_file(name: PadPath, path: FilePath, request: Request) -> JSONResponse:
        """Write a file (parents created) from the raw body; it replaces the old one only
        once whole. A pad that does not exist yet is made (and started) first."""
        limit = manager.settings.max_upload_bytes
        if not manager.exists(segment_name(name)):
            await manager.get_or_create(segment_name(name))
        files = await files_of(name)
        upload = await asyncio.to_thread(files.upload, segment_name(path), limit)
        try:
            await _receive(request, upload)
            created = await asyncio.to_thread(upload.commit)
        except ClientDisconnect:  # nobody to answer; nothing was written
            upload.abort()
            return error(
                400, "the upload was cut off; send the whole file again", "InvalidInputError"
            )
        except BaseException:
            upload.abort()  # quick (an unlink)
            raise
        answer = FileWritten(path=upload.path, size=upload.size)
        return JSONResponse(wire(answer), status_code=201 if created else 200)

    @app.delete("/v1/pads/{name}/files/{path:path}", **answers(FileDeleted, 400, 404, 409))
    async def delete_file(name: PadPath, path: FilePath) -> dict[str, Any]:
        """Delete a file, a symbolic link or an empty directory."""
        files = await files_of(name)
        deleted = await asyncio.to_thread(files.delete, segment_name(path))
        return wire(FileDeleted(deleted=deleted))


async def _receive(request: Request, upload: Upload) -> None:
    """The request's body into ``upload``, in batches written on a worker thread."""
    batch = bytearray()
    async for chunk in request.stream():
        batch += chunk
        if len(batch) >= WRITE_BATCH or upload.size + len(batch) > upload.limit:
            await asyncio.to_thread(upload.write, bytes(batch))
            batch.clear()
    await asyncio.to_thread(upload.write, bytes(batch))


def _content_headers(path: str, download: bool) -> tuple[str, dict[str, str]]:
    """The media type and headers of a download: attachment unless an image or plain text
    (and not ``download``)."""
    name = path.rsplit("/", 1)[-1]
    media_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
    kind = "inline" if media_type in INLINE_TYPES and not download else "attachment"
    if media_type.startswith("text/"):
        media_type += "; charset=utf-8"
    disposition = content_disposition(name, inline=kind == "inline")
    return media_type, {**SAFE_HEADERS, "content-disposition": disposition}


class DescriptorResponse(Response):
    """A file's bytes from a descriptor opened (and checked) before: the planned range (the
    whole file, or one range of it) read in pieces on worker threads, nothing for HEAD; the
    descriptor is closed whatever happens."""

    def __init__(self, fd: int, decided: Plan, media_type: str, headers: dict[str, str]) -> None:
        self.fd = fd
        self.decided = decided
        self.status_code = decided.status
        self.media_type = media_type
        self.background = None
        self.init_headers({**headers, **decided.headers, "content-type": media_type})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            start = {
                "type": "http.response.start",
                "status": self.status_code,
                "headers": self.raw_headers,
            }
            await send(start)
            offset = self.decided.start
            left = 0 if scope["method"] == "HEAD" else self.decided.length
            while left > 0:  # a file that grows meanwhile is cut at the size announced
                chunk = await asyncio.to_thread(os.pread, self.fd, min(READ_CHUNK, left), offset)
                if not chunk:
                    break
                left -= len(chunk)
                offset += len(chunk)
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            os.close(self.fd)
