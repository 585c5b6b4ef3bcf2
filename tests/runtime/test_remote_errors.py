"""Every error the server raises arrives in RemoteRuntime (and the CLI's client) as the same
class, with the status errors.py gives it, over a real loopback socket."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from scratchpad.cli.background import checked
from scratchpad.config import Settings
from scratchpad.errors import (
    ForbiddenError,
    KernelStartError,
    ScratchpadError,
    UnauthorizedError,
    VenvError,
    error_classes,
    error_from_http,
    http_status,
)
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.runtime.remote import RemoteRuntime
from scratchpad.server.app import create_app
from tests.server_helpers import free_port

KEY = "test-key"
CLASSES = sorted(error_classes().items())


class Failing(ScratchpadManager):
    """A manager whose pads fail to come up with the error a test chose."""

    failure: ScratchpadError | None = None

    async def get_or_create(self, name: str, **kwargs: Any) -> Any:
        if self.failure is not None:
            raise self.failure
        return await super().get_or_create(name, **kwargs)


@pytest.fixture
async def served(workspace: Path, settings: Settings) -> AsyncIterator[tuple[str, Failing]]:
    """(url, manager) of the app served by uvicorn on a loopback port."""
    manager = Failing(workspace=workspace, settings=settings)
    async with manager:
        port = free_port()
        config = uvicorn.Config(
            create_app(manager, api_key=KEY), host="127.0.0.1", port=port, log_level="error"
        )
        server = uvicorn.Server(config)
        task = asyncio.create_task(server.serve())
        async with asyncio.timeout(20):
            while not server.started:  # noqa: ASYNC110 - uvicorn offers no event
                await asyncio.sleep(0.01)
        try:
            yield f"http://127.0.0.1:{port}", manager
        finally:
            server.should_exit = True
            await task


@pytest.mark.parametrize(("name", "cls"), CLASSES, ids=[name for name, _ in CLASSES])
async def test_each_error_class_arrives_as_itself(
    served: tuple[str, Failing], name: str, cls: type[ScratchpadError]
) -> None:
    url, manager = served
    manager.failure = cls(f"the {name} of this test")
    pad = RemoteRuntime("p", url=url, api_key=KEY)
    try:
        with pytest.raises(ScratchpadError) as raised:
            await pad.start()
        assert type(raised.value) is cls
        assert f"the {name} of this test" in str(raised.value)
        with pytest.raises(ScratchpadError) as raised:
            await pad.execute("1")
        assert type(raised.value) is cls
    finally:
        await pad.close()
    async with httpx.AsyncClient(base_url=url) as http:
        answer = await http.post(
            "/scratchpad/start", json={"name": "p"}, headers={"Authorization": f"Bearer {KEY}"}
        )
    assert answer.status_code == http_status(manager.failure)
    assert answer.json()["type"] == name
    with pytest.raises(ScratchpadError) as raised:
        checked(answer)  # the CLI's client
    assert type(raised.value) is cls


async def test_refusals_of_the_gate_are_access_errors(served: tuple[str, Failing]) -> None:
    url, _ = served
    with pytest.raises(UnauthorizedError, match="SCRATCHPAD_REMOTE_API_KEY"):
        await RemoteRuntime("p", url=url, api_key="wrong").start()
    async with httpx.AsyncClient(base_url=url) as http:
        foreign = await http.get("/", headers={"Host": "evil.example"})
        missing = await http.get("/v1/pads")
    assert foreign.status_code == 403 and foreign.json()["type"] == "ForbiddenError"
    with pytest.raises(ForbiddenError):
        checked(foreign)
    assert missing.status_code == 401 and missing.json()["type"] == "UnauthorizedError"
    with pytest.raises(UnauthorizedError):
        checked(missing)


def test_a_pad_that_cannot_come_up_is_the_servers_setup() -> None:
    """503: nothing is wrong with the request; the server's side needs the message's fix."""
    assert http_status(KernelStartError("x")) == 503
    assert http_status(VenvError("x")) == 503
    assert type(error_from_http(403, None, "refused")) is ForbiddenError  # no class named
    assert type(error_from_http(401, None, "refused")) is UnauthorizedError
