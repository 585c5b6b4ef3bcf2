"""The Ray backend on a real local cluster (tests/ray/cluster.py): placement, a pad found by a
second driver and by a restarted server, a lost node, a cell followed from another process,
and the refused network address. The contract suite runs on it too (test_contract.py)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from scratchpad.config import Settings
from scratchpad.errors import ClusterError, ConfigError, InvalidInputError
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.runtime.raypad import RayRuntime
from tests.conftest import wait_until_busy
from tests.ray.cluster import RAY_MISSING, RayCluster, end_pads

ray = pytest.importorskip("ray", reason=RAY_MISSING)
SRC = str(Path(__file__).resolve().parents[2] / "src")
UNPICKLABLE = "held = __import__('threading').Lock()"  # no checkpoint keeps it: a live kernel


@pytest.fixture
def ray_settings(settings: Settings, ray_cluster: RayCluster) -> Settings:
    """This test's pads: its own home (the store) and namespace on the session's cluster."""
    return settings.model_copy(
        update={"backend": "ray", "ray_address": ray_cluster.address,
                "ray_namespace": f"t-{uuid.uuid4().hex[:12]}"}
    )  # fmt: skip


@pytest.fixture
async def on_ray(ray_settings: Settings) -> AsyncIterator[ScratchpadManager]:
    manager = ScratchpadManager(settings=ray_settings)
    yield manager
    await manager.close_all()
    end_pads(ray_settings.ray_namespace)


def second_driver(settings: Settings, code: str) -> dict[str, object]:
    """Run ``code`` (an async body using ``manager``) in another process, a driver of the
    same cluster with the same settings; what it printed last, as JSON."""
    script = textwrap.dedent(
        """
        import asyncio, json, sys
        from scratchpad.config import Settings
        from scratchpad.runtime.manager import ScratchpadManager
        settings = Settings.model_validate_json(sys.argv[1])
        async def main():
            manager = ScratchpadManager(settings=settings)
        {body}
            await manager.detach_all()
        asyncio.run(main())
        """
    ).format(body=textwrap.indent(textwrap.dedent(code), "    "))
    env = {**os.environ, "PYTHONPATH": SRC}
    done = subprocess.run(
        [sys.executable, "-c", script, settings.model_dump_json()],
        capture_output=True, text=True, timeout=120, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


async def test_a_pad_is_placed_where_its_resources_are(
    on_ray: ScratchpadManager, ray_cluster: RayCluster
) -> None:
    on_a = await on_ray.get_or_create("on-a", resources={"custom": {"node_a": 0.01}})
    on_b = await on_ray.get_or_create("on-b", resources={"custom": {"node_b": 0.01}})
    assert isinstance(on_a, RayRuntime) and isinstance(on_b, RayRuntime)
    assert on_a.node == ray_cluster.node_a.node_id
    assert on_b.node == ray_cluster.node_b.node_id
    assert (await on_a.execute("6 * 7")).result == "42"
    listed = await on_ray.list_pads()  # each with its kernel's memory, on its node
    assert [p.name for p in listed] == ["on-a", "on-b"]
    assert all((p.memory_bytes or 0) > 10 * 1024 * 1024 for p in listed), listed
    with pytest.raises(InvalidInputError, match="cpus must be a number >= 0"):
        await on_ray.get_or_create("bad", resources={"cpus": -1})
    with pytest.raises(InvalidInputError, match="unknown resource"):
        await on_ray.get_or_create("bad", resources={"cores": 1})


async def test_a_pads_memory_request_is_its_kernels_limit(on_ray: ScratchpadManager) -> None:
    pad = await on_ray.get_or_create("sized", resources={"memory_mb": 300, "custom": {}})
    cell = await pad.execute("x = bytearray(600 * 1024 * 1024)")
    assert cell.status == "killed" and "300 MiB" in (cell.error or ""), cell.error


async def test_a_second_driver_and_a_restarted_server_find_the_same_live_pad(
    on_ray: ScratchpadManager, ray_settings: Settings
) -> None:
    pad = await on_ray.get_or_create("shared")
    await pad.execute(f"x = 41\n{UNPICKLABLE}")
    found = second_driver(
        ray_settings,
        """
        pad = await manager.get_or_create("shared")
        cell = await pad.execute("x + 1, type(held).__name__")
        print(json.dumps({"result": cell.result}))
        """,
    )
    assert found == {"result": "(42, 'lock')"}  # the same kernel: its lock was never saved
    await on_ray.detach_all()  # this server goes away (as a kill would); the actor stays
    again = ScratchpadManager(settings=ray_settings)
    try:
        pad = await again.get_or_create("shared")
        assert (await pad.execute("type(held).__name__")).result == "'lock'"
    finally:
        await again.close_all()


async def test_a_cell_is_followed_by_id_from_another_process(
    on_ray: ScratchpadManager, ray_settings: Settings
) -> None:
    pad = await on_ray.get_or_create("detached")
    handle = await pad.start_cell(
        "import time\nfor i in range(3):\n    print('tick', i, flush=True)\n    time.sleep(0.5)"
    )
    seen = second_driver(
        ray_settings,
        f"""
        pad = await manager.get_or_create("detached")
        handle = await pad.cell({handle.id!r})
        cell = await handle.wait(60)
        print(json.dumps({{"status": cell.status, "stdout": cell.stdout}}))
        """,
    )
    assert seen == {"status": "ok", "stdout": "tick 0\ntick 1\ntick 2\n"}
    assert (await handle.wait(30)) is not None


async def test_a_lost_node_kills_the_running_cell_and_the_pad_comes_back_elsewhere(
    on_ray: ScratchpadManager, ray_cluster: RayCluster, wheel: Path
) -> None:
    doomed = ray_cluster.add_worker(doomed=1)
    pad = await on_ray.get_or_create("mover", resources={"custom": {"doomed": 0.01}})
    assert isinstance(pad, RayRuntime) and pad.node == doomed.node_id
    await pad.install_packages([str(wheel)])
    assert (await pad.execute("import sp_demo_pkg\nx = 41")).status == "ok"
    running = asyncio.create_task(pad.execute("import time\ntime.sleep(120)"))
    await wait_until_busy(pad)
    await asyncio.to_thread(ray_cluster.remove_worker, doomed)
    cell = await asyncio.wait_for(running, 90)
    assert cell.status == "killed"
    assert "node lost" in (cell.error or ""), cell.error
    assert pad.closed
    back = await on_ray.get_or_create("mover", resources={"custom": {"pad_node": 0.01}})
    assert isinstance(back, RayRuntime) and back.node not in (None, doomed.node_id)
    restored = await back.execute("import sp_demo_pkg\nx + 1, sp_demo_pkg.VERSION")
    assert restored.result == "(42, '1.0')", (restored.error, restored.logs)
    assert "It restored the variables saved after cell" in restored.logs  # the report
    history = [cell.status for cell in await back.load_cells()]
    assert "killed" in history  # the lost cell stays recorded as it ended


def test_a_cluster_off_this_machine_is_refused_unless_trusted(settings: Settings) -> None:
    for address in ("10.1.2.3:6379", "ray://ray-head.example:10001", "auto"):
        off = settings.model_copy(update={"backend": "ray", "ray_address": address})
        with pytest.raises(ConfigError, match="SCRATCHPAD_RAY_TRUST_NETWORK=1"):
            ScratchpadManager(settings=off)
    trusted = settings.model_copy(
        update={"backend": "ray", "ray_address": "10.1.2.3:6379", "ray_trust_network": True}
    )
    ScratchpadManager(settings=trusted)  # made; it connects at a pad's first use only
    for address in ("127.0.0.1:6379", "localhost:6379", "ray://[::1]:10001"):
        ScratchpadManager(
            settings=settings.model_copy(update={"backend": "ray", "ray_address": address})
        )


async def test_vault_values_reach_the_kernel_and_never_come_back_unscrubbed(
    ray_settings: Settings,
) -> None:
    from scratchpad.vault.store import Vault

    secret = "s3cr3t-" + uuid.uuid4().hex
    vault = Vault(ray_settings, keyring=None)
    vault.save("postgres", "prod", {"password": secret}, secure_keys=["password"])
    manager = ScratchpadManager(settings=ray_settings, vault=vault)
    try:
        pad = await manager.get_or_create("creds")
        code = (
            "import os\n"
            "found = [k for k, v in os.environ.items() if v == " + repr(secret) + "]\n"
            "print(found, os.environ[found[0]])"
        )
        cell = await pad.execute(code)
        assert cell.status == "ok", cell.error
        assert "DS_" in cell.stdout and secret not in cell.stdout  # given, then scrubbed
        assert secret not in json.dumps([c.to_dict() for c in await pad.load_cells()])
    finally:
        await manager.close_all()


async def test_what_the_server_relays_is_scrubbed_with_the_secrets_only_it_knows(
    on_ray: ScratchpadManager,
) -> None:
    from scratchpad.scrub import register

    halves = ("srv-only-", uuid.uuid4().hex)
    register([("".join(halves), "SERVER_ONLY_KEY")])  # this process's scrubber, not the actor's
    pad = await on_ray.get_or_create("relay")
    code = f"print({halves[0]!r} + {halves[1]!r})"
    items = [item async for item in pad.execute_streaming(code)]
    shown = json.dumps([str(item) for item in items])
    assert halves[1] not in shown and "SERVER_ONLY_KEY" in shown


async def test_an_idle_pad_sleeps_without_an_actor_and_wakes_with_its_variables(
    on_ray: ScratchpadManager, ray_settings: Settings
) -> None:
    import time

    pad = await on_ray.get_or_create("napper")
    await pad.execute("x = 41")
    slept = await on_ray.sleep_idle(time.time() + ray_settings.sleep_after_s + 1)
    assert slept == ["napper"]
    backend = on_ray.backend
    assert await backend.find("napper") is None  # type: ignore[attr-defined]
    assert [(p.name, p.status) for p in await on_ray.list_pads()] == [("napper", "asleep")]
    woken = await on_ray.get_or_create("napper")
    assert (await woken.execute("x + 1")).result == "42"


async def test_a_pad_cannot_reach_rays_sockets_or_its_token(
    on_ray: ScratchpadManager,
) -> None:
    """Ray's sockets (raylet, object store) and token would let a cell act on the cluster
    outside its sandbox: its view leaves them out."""
    from ray._private import worker

    temp = worker._global_node.get_temp_dir_path() if worker._global_node else "/tmp/ray"
    pad = await on_ray.get_or_create("nosy")
    code = (
        "import os, glob\n"
        f"found = glob.glob({temp!r} + '/session_*/sockets/*')\n"
        "found += [p for p in [os.path.expanduser('~/.ray/auth_token')] if os.path.exists(p)]\n"
        "found, 'RAY_AUTH_TOKEN' in os.environ"
    )
    cell = await pad.execute(code)
    assert cell.result == "([], False)", (cell.result, cell.error)


def test_a_cluster_without_token_authentication_is_refused(
    ray_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    from scratchpad.runtime import raybackend

    monkeypatch.setattr(raybackend, "token_auth", lambda ray: False)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda **options: None)
    monkeypatch.setattr(ray, "shutdown", lambda: None)
    with pytest.raises(ConfigError, match="does not ask for a token"):
        raybackend.connect(ray_settings)
    allowed = ray_settings.model_copy(update={"ray_allow_no_auth": True})
    raybackend.connect(allowed)  # the user said every pad may


async def test_a_stopping_server_leaves_its_pads_to_the_cluster_and_a_new_one_lists_them_live(
    on_ray: ScratchpadManager, ray_settings: Settings
) -> None:
    pad = await on_ray.get_or_create("kept")
    await pad.execute(UNPICKLABLE)
    await on_ray.close_all(reason="the server stopped")
    assert await on_ray.backend.find("kept") is not None  # type: ignore[attr-defined]
    again = ScratchpadManager(settings=ray_settings)
    try:
        listed = await again.list_pads()
        assert [(p.name, p.status) for p in listed] == [("kept", "idle")]
        assert (listed[0].memory_bytes or 0) > 10 * 1024 * 1024  # its kernel's, on its node
        pad = await again.get_or_create("kept")
        assert (await pad.execute("type(held).__name__")).result == "'lock'"
    finally:
        await again.close_all()


async def test_an_idle_pads_actor_sleeps_by_itself_and_its_holder_wakes_it(
    ray_settings: Settings,
) -> None:
    """No server needs to run for a pad to sleep: its actor goes when idle; a runtime that
    still holds it makes a new one at its next use (what it sent never ran twice)."""
    napping = ray_settings.model_copy(update={"sleep_after_s": 1.0})
    manager = ScratchpadManager(settings=napping)
    try:
        pad = await manager.get_or_create("dozer")
        await pad.execute("x = 41")
        backend = manager.backend
        async with asyncio.timeout(30):
            while await backend.find("dozer") is not None:  # type: ignore[attr-defined]  # noqa: ASYNC110
                await asyncio.sleep(0.2)
        assert (await pad.execute("x + 1")).result == "42"
        numbers = [cell.number for cell in await pad.load_cells()]
        assert numbers == [1, 2]
    finally:
        await manager.close_all()
        end_pads(napping.ray_namespace)


async def test_a_secret_learnt_later_is_scrubbed_from_a_running_pads_stored_cells(
    on_ray: ScratchpadManager,
) -> None:
    from scratchpad.scrub import register

    secret = "later-" + uuid.uuid4().hex
    pad = await on_ray.get_or_create("printed")
    assert secret in (await pad.execute(f"print({secret!r})")).stdout  # not yet a secret
    await pad.execute("1 + 1")
    register([(secret, "LATER_KEY")])  # then saved as one (the server's scrubber learns it)
    await on_ray.rescrub()
    assert isinstance(pad, RayRuntime)
    assert secret not in (pad.root / "history.jsonl").read_text()
    assert all(secret not in cell.stdout for cell in await pad.load_cells())
    assert (await pad.execute("2 + 2")).result == "4"  # and the pad goes on


async def test_a_server_on_ray_answers_every_http_door_as_a_local_one(
    ray_cluster: RayCluster, tmp_path: Path
) -> None:
    """`scratchpad serve` with SCRATCHPAD_BACKEND=ray: the remote-backend protocol (placement
    included), the pad list, a detached cell and its numbered events, all over loopback."""
    import httpx

    from tests.server_helpers import running_server

    namespace = f"t-{uuid.uuid4().hex[:12]}"
    env = {
        "SCRATCHPAD_BACKEND": "ray", "SCRATCHPAD_RAY_ADDRESS": ray_cluster.address,
        "SCRATCHPAD_RAY_NAMESPACE": namespace, "PYTHONPATH": SRC,
    }  # fmt: skip
    headers = {"authorization": "Bearer ray-key"}
    try:
        with running_server(tmp_path / "home", tmp_path, "ray-key", env) as (url, _):
            async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as client:
                placed = {"name": "web", "resources": {"custom": {"node_b": 0.01}}}
                assert (await client.post("/scratchpad/start", json=placed)).json() == {"ok": True}
                body = {"name": "web", "code": "x = 41\nprint('hi')\nx + 1", "stream_output": True}
                answer = await client.post("/scratchpad/execute-stream", json=body)
                frames = [json.loads(part.removeprefix("data: "))
                          for part in answer.text.strip().split("\n\n")]  # fmt: skip
                assert frames[-1]["type"] == "cell" and frames[-1]["cell"]["result"] == "42"
                assert {"type": "output", "stream": "stdout", "text": "hi\n"} in frames
                listed = (await client.get("/v1/pads")).json()
                assert [(p["name"], p["status"]) for p in listed["pads"]] == [("web", "idle")]
                submitted = await client.post("/v1/pads/web/cells", json={"code": "x * 2"})
                assert submitted.status_code == 202
                cell_id = submitted.json()["id"]
                events = await client.get(f"/v1/pads/web/cells/{cell_id}/events")
                last = json.loads(events.text.strip().split("\n\n")[-1].split("data: ", 1)[1])
                assert last["type"] == "cell" and last["cell"]["result"] == "82"
                slow = (
                    "import time\nfor i in range(4):\n    print(i, flush=True)\n    time.sleep(0.5)"
                )
                cell_id = (await client.post("/v1/pads/web/cells", json={"code": slow})).json()[
                    "id"
                ]
                store = {**env, "SCRATCHPAD_RAY_STORE": str(tmp_path / "home")}  # the first's
                with running_server(tmp_path / "home2", tmp_path, "ray-key", store) as (other, _):
                    async with httpx.AsyncClient(
                        base_url=other, headers=headers, timeout=60
                    ) as second:  # another server of the same cluster follows the cell live
                        events = await second.get(f"/v1/pads/web/cells/{cell_id}/events")
        frames = [
            json.loads(part.split("data: ", 1)[1]) for part in events.text.strip().split("\n\n")
        ]
        printed = "".join(frame.get("text", "") for frame in frames if frame["type"] == "output")
        assert printed == "0\n1\n2\n3\n"
        assert frames[-1]["type"] == "cell" and frames[-1]["cell"]["status"] == "ok"
    finally:
        end_pads(namespace)


def test_without_ray_the_ray_backend_says_what_to_install(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray fails, as where it is missing
    with pytest.raises(ConfigError, match=r"pip install 'scratchpad\[ray\]'"):
        ScratchpadManager(settings=settings.model_copy(update={"backend": "ray"}))


async def test_a_pad_whose_actor_slept_by_itself_is_listed_asleep(
    ray_settings: Settings,
) -> None:
    napping = ray_settings.model_copy(update={"sleep_after_s": 1.0})
    manager = ScratchpadManager(settings=napping)
    try:
        pad = await manager.get_or_create("listed")
        await pad.execute("x = 1")
        async with asyncio.timeout(30):
            while await manager.backend.find("listed") is not None:  # type: ignore[attr-defined]  # noqa: ASYNC110
                await asyncio.sleep(0.2)
        assert [(p.name, p.status) for p in await manager.list_pads()] == [("listed", "asleep")]
        again = await manager.get_or_create("listed")
        assert (await again.execute("x")).result == "1"
    finally:
        await manager.close_all()
        end_pads(napping.ray_namespace)


def test_an_address_where_no_cluster_answers_is_said_at_once() -> None:
    """Ray's own driver would retry for minutes: a pad's first request must not hang."""
    from scratchpad.runtime.raybackend import reachable
    from tests.server_helpers import free_port

    with pytest.raises(ClusterError, match=r"no Ray cluster answers at 127\.0\.0\.1:"):
        reachable(f"127.0.0.1:{free_port()}")
    with pytest.raises(ConfigError, match="is not host:port"):
        reachable("a-cluster-without-a-port")


async def test_resources_no_node_has_are_said_after_the_wait_and_free_the_name(
    ray_settings: Settings,
) -> None:
    impatient = ray_settings.model_copy(update={"ray_place_timeout_s": 2.0})
    manager = ScratchpadManager(settings=impatient)
    try:
        with pytest.raises(ClusterError, match="no node of the Ray cluster took it within 2 s"):
            await manager.get_or_create("greedy", resources={"custom": {"no_such_node": 1}})
        pad = await manager.get_or_create("greedy")  # the name is free again
        assert (await pad.execute("1 + 1")).result == "2"
    finally:
        await manager.close_all()
        end_pads(impatient.ray_namespace)


async def test_a_node_running_another_scratchpad_is_refused(
    on_ray: ScratchpadManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    from scratchpad.runtime import raybackend

    monkeypatch.setattr(raybackend, "__version__", "0.0.0-elsewhere")  # this server's, here
    with pytest.raises(ClusterError, match="install the same version on the server and every"):
        await on_ray.get_or_create("versions")


async def test_a_pad_removed_by_another_server_says_its_actor_stopped_not_a_lost_node(
    on_ray: ScratchpadManager, ray_settings: Settings
) -> None:
    pad = await on_ray.get_or_create("shared-rm")
    await pad.execute("z = 1")
    other = ScratchpadManager(settings=ray_settings)
    await other.remove("shared-rm")
    cell = await pad.execute("z")
    assert cell.status == "killed"
    assert "The pad's actor stopped" in (cell.error or "") and "node" not in (cell.error or "")


async def test_an_actor_queues_a_callers_cells_in_the_order_it_sent_them() -> None:
    """An async actor may start two calls in either order; the second cell waits until the
    first is queued (and a caller an actor meets for the first time waits for nothing)."""
    from scratchpad.runtime.rayactor import Turns

    turns, queued = Turns(), []

    async def cell(number: int) -> None:
        await turns.wait("caller", number)
        queued.append(number)
        turns.done("caller", number)

    turns.expect("caller", 5)
    second = asyncio.ensure_future(cell(6))
    await asyncio.sleep(0.05)
    assert queued == []  # 6 waits for 5
    await cell(5)
    await second
    assert queued == [5, 6]
    async with asyncio.timeout(1):
        await turns.wait("someone-new", 0)
