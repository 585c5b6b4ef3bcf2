"""Browser sessions, in-process (httpx ASGITransport): login links, the tab's session header
(no cookie is ever read), logging out a whole login, signed URLs for downloads, the guard's
Host / Origin / form-scope checks, the HTML refusals and the security headers."""

from __future__ import annotations

import json
import logging
import signal
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse
from typer.testing import CliRunner

from scratchpad.cli.app import app as cli
from scratchpad.config import Settings
from scratchpad.padnames import dir_name
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.server import browser_auth
from scratchpad.server.app import create_app
from scratchpad.server.browser_auth import BrowserSessions, auth_of, form_scope
from scratchpad.server.headers import CSP
from scratchpad.server.hosts import OwnHosts
from scratchpad.server.logfilter import ACCESS_LOGGER, HideTokens, hide_tokens
from tests.server_helpers import running_server

KEY = "browser-test-key"
BASE = "http://127.0.0.1:8765"
AUTH = {"Authorization": f"Bearer {KEY}"}
SAME_ORIGIN = {"Origin": BASE}
HEADER = "X-Scratchpad-Session"


def _with_probe_routes(app: FastAPI) -> FastAPI:
    """Routes standing in for other parts' pages: they say who the guard let in."""

    async def who(request: Request) -> dict[str, Any]:
        return {"auth": auth_of(request), "form": form_scope(request)}

    app.add_api_route("/v1/forms/{form_id}/who", who)  # below the form's own route

    async def sandboxed() -> PlainTextResponse:
        return PlainTextResponse("file", headers={"content-security-policy": "sandbox"})

    app.add_api_route("/v1/sandboxed", sandboxed)
    return app


@pytest.fixture
async def app(manager: ScratchpadManager) -> FastAPI:
    return _with_probe_routes(create_app(manager, api_key=KEY, origin=BASE))


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as http:
        yield http


def sessions_of(app: FastAPI) -> BrowserSessions:
    found: BrowserSessions = app.state.browser_sessions
    return found


async def redeem(client: httpx.AsyncClient, token: str) -> httpx.Response:
    """What the login page's script does with a link's token."""
    return await client.post("/login", json={"token": token})


async def log_in(
    client: httpx.AsyncClient, app: FastAPI, scope: str = "all", by: str | None = None
) -> dict[str, str]:
    """The header of a fresh session of ``scope`` (from a link the session ``by`` made)."""
    answer = await redeem(client, sessions_of(app).grant(scope, by=by))
    assert answer.status_code == 200, answer.text
    return {HEADER: answer.json()["session"]}


async def test_a_login_link_opens_a_page_whose_script_trades_the_token_for_a_header(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    link = sessions_of(app).link(BASE, next_path="/#/pads/main")
    assert link.startswith(f"{BASE}/login?token=") and "pads" not in link
    page = await client.get(link)
    assert page.status_code == 200 and page.headers["cache-control"] == "no-store"
    assert '<script type="module" src="/static/login.js"></script>' in page.text
    assert "set-cookie" not in page.headers and "<script>" not in page.text  # no inline code
    token = link.split("token=", 1)[1]
    assert sessions_of(app).pending(token)  # opening the page does not use the link up
    answer = await redeem(client, token)
    assert answer.status_code == 200 and answer.headers["cache-control"] == "no-store"
    assert "set-cookie" not in answer.headers
    body = answer.json()
    assert body["scope"] == "all" and body["next"] == "/#/pads/main"
    assert len(body["session"]) > 40 and body["expires_at"] > 0
    pads = await client.get("/v1/pads", headers={HEADER: body["session"]})
    assert pads.status_code == 200 and pads.json() == {"pads": []}
    assert (await client.get("/v1/pads")).status_code == 401  # the header is what let it in


async def test_a_cookie_is_never_enough(client: httpx.AsyncClient, app: FastAPI) -> None:
    session = (await log_in(client, app))[HEADER]
    for name in ("scratchpad_session", HEADER, "session"):
        cookie = {"Cookie": f"{name}={session}", **SAME_ORIGIN}
        assert (await client.get("/v1/pads", headers=cookie)).status_code == 401
        made = await client.post("/v1/login-links", headers=cookie)
        assert made.status_code == 401, name


async def test_a_token_works_once_and_an_expired_one_not_at_all(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    token = sessions_of(app).grant()
    assert (await redeem(client, token)).status_code == 200
    expired = sessions_of(app).grant(ttl_s=0)
    for used in (token, expired, "made-up", ""):
        page = await client.get(f"/login?token={used}")
        assert page.status_code == 401
        assert page.headers["content-type"].startswith("text/html")
        assert "used already, it expired" in page.text and "scratchpad login" in page.text
        assert "<script" not in page.text
        again = await redeem(client, used)
        assert again.status_code == 401 and again.json()["type"] == "UnauthorizedError"
        assert "scratchpad login" in again.json()["error"]


def test_a_session_ends_after_its_lifetime() -> None:
    sessions = BrowserSessions(session_ttl_s=0)
    login = sessions.redeem(sessions.grant())
    assert login is not None and login.scope == "all"
    assert sessions.scope_of(login.session_id) is None
    lasting = BrowserSessions(session_ttl_s=3600)
    kept = lasting.redeem(lasting.grant("form:f1"))
    assert kept is not None and lasting.scope_of(kept.session_id) == "form:f1"
    assert lasting.log_out(kept.session_id) == 1
    assert lasting.scope_of(kept.session_id) is None


async def test_the_session_ttl_setting_reaches_the_app(manager: ScratchpadManager) -> None:
    settings = Settings(home=manager.settings.home, session_ttl_s=5)
    app = create_app(ScratchpadManager(settings=settings), api_key=KEY, origin=BASE)
    assert sessions_of(app).session_ttl_s == 5


async def test_session_state_changes_need_the_servers_own_origin(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    session = await log_in(client, app)
    for origin in ("http://evil.example", "http://127.0.0.1:9999", "null", BASE + ".evil.com"):
        foreign = await client.post("/v1/login-links", headers={**session, "Origin": origin})
        assert foreign.status_code == 403, origin
        assert foreign.json()["type"] == "ForbiddenError"
        assert "only the server's own pages" in foreign.json()["error"]
    missing = await client.post("/v1/login-links", headers=session)
    assert missing.status_code == 403 and "without an Origin" in missing.json()["error"]
    own = await client.post("/v1/login-links", headers={**session, **SAME_ORIGIN})
    assert own.status_code == 200 and own.json()["url"].startswith(f"{BASE}/login?token=")
    reading = await client.get("/v1/pads", headers=session)  # reads need no Origin
    assert reading.status_code == 200


async def test_bearer_requests_need_neither_origin_nor_a_known_host(
    client: httpx.AsyncClient,
) -> None:
    elsewhere = {**AUTH, "Host": "tunnel.example:9000"}
    made = await client.post("/v1/login-links", headers=elsewhere, json={"next": "/"})
    assert made.status_code == 200
    body = made.json()
    assert set(body) == {"url", "expires_at"} and isinstance(body["expires_at"], float)
    assert body["url"].startswith(f"{BASE}/login?token=")  # the server's own address
    assert (await client.get("/v1/pads", headers=elsewhere)).status_code == 200


async def test_a_foreign_host_is_refused_to_sessions_and_login_links(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    session = await log_in(client, app)
    rebound = {**session, "Host": "attacker.example:8765"}
    answer = await client.get("/v1/pads", headers=rebound)
    assert answer.status_code == 403
    assert "SCRATCHPAD_ALLOWED_HOSTS" in answer.json()["error"]
    token = sessions_of(app).grant()
    login = await client.get(f"/login?token={token}", headers={"Host": "attacker.example:8765"})
    assert login.status_code == 403
    foreign = {"Host": "attacker.example:8765"}
    redeemed = await client.post("/login", json={"token": token}, headers=foreign)
    assert redeemed.status_code == 403 and sessions_of(app).pending(token)
    for twin in ("localhost:8765", "[::1]:8765", "LOCALHOST:8765"):
        assert (await client.get("/v1/pads", headers={**session, "Host": twin})).status_code == 200
    for wrong in ("localhost:8766", "127.0.0.1"):
        assert (await client.get("/v1/pads", headers={**session, "Host": wrong})).status_code == 403


async def test_allowed_hosts_let_more_names_in(manager: ScratchpadManager) -> None:
    hosts = OwnHosts(BASE, "box.lan, proxy.example:443 ,")
    assert hosts.allows("box.lan:8765") and hosts.allows("box.lan:1") and hosts.allows("box.lan")
    assert hosts.allows("proxy.example:443") and not hosts.allows("proxy.example:444")
    assert not hosts.allows("evil.example:8765") and not hosts.allows("")
    settings = Settings(home=manager.settings.home, allowed_hosts="box.lan")
    app = create_app(ScratchpadManager(settings=settings), api_key=KEY, origin=BASE)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://box.lan:8765") as http:
        session = await log_in(http, app)
        assert (await http.get("/v1/pads", headers=session)).status_code == 200


async def test_a_form_session_reaches_its_form_and_nothing_else(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    session = await log_in(client, app, scope="form:f1")
    answer = await client.get("/v1/forms/f1/who", headers=session)
    assert answer.json() == {"auth": "form:f1", "form": "f1"}
    staged = await client.get("/v1/datavault/submissions/sub_000000000000", headers=session)
    assert staged.json()["type"] == "SubmissionNotFoundError"  # past the guard
    post = {**session, **SAME_ORIGIN}
    submit = await client.post("/v1/datavault/submissions", headers=post, json={})
    assert submit.status_code == 422  # past the guard, refused by the route for its body
    for method, path in (
        ("GET", "/v1/pads"),
        ("GET", "/v1/forms/f2"),
        ("POST", "/v1/login-links"),
        ("POST", "/v1/signed-urls"),
        ("POST", "/scratchpad/start"),
        ("DELETE", "/v1/forms/f1"),
    ):
        refused = await client.request(method, path, headers=post)
        assert refused.status_code == 403, (method, path)
        assert refused.json() == {
            "error": "this browser session may only fill in form 'f1'; open the login link "
            "printed by `scratchpad serve` for the rest",
            "type": "ForbiddenError",
        }


async def test_bearer_and_full_sessions_have_no_form_scope(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    answer = await client.get("/v1/forms/f1/who", headers=AUTH)
    assert answer.json() == {"auth": "bearer", "form": None}
    session = await log_in(client, app)
    assert (await client.get("/v1/forms/f1/who", headers=session)).json() == {
        "auth": "all",
        "form": None,
    }


async def test_pages_are_code_anyone_may_load_and_data_needs_a_session(
    client: httpx.AsyncClient,
) -> None:
    for path in ("/", "/docs", "/connect/f1", "/static/login.js"):
        page = await client.get(path)
        assert page.status_code == 200, path
        assert "/v1/" not in page.text or path.startswith("/static/"), path  # no data
    foreign = await client.get("/", headers={"Host": "attacker.example:8765"})
    assert foreign.status_code == 403  # DNS rebinding: pages too
    api = await client.get("/v1/pads")
    assert api.status_code == 401 and api.json()["type"] == "UnauthorizedError"
    assert api.headers["www-authenticate"] == 'Bearer realm="scratchpad"'
    stale = await client.get("/v1/pads", headers={HEADER: "not-a-session"})
    assert stale.status_code == 401
    for path in ("/elsewhere", "//evil.example/x"):
        page = await client.get(httpx.URL(BASE + path))
        assert page.status_code == 401 and page.request.url.path == path
        assert "scratchpad login" in page.text and "evil.example" not in page.text


async def test_logging_out_ends_the_whole_login(client: httpx.AsyncClient, app: FastAPI) -> None:
    """Every session of the login (those of the links it made, and theirs) and every link it
    made that was not used yet; another login lives on."""
    person = await log_in(client, app)
    sessions = sessions_of(app)
    minted = await log_in(client, app, by=person[HEADER])
    grandchild = await log_in(client, app, scope="form:f1", by=minted[HEADER])
    unused = sessions.grant(by=person[HEADER])
    unused_form = sessions.grant("form:f2", by=minted[HEADER])
    made = await client.post("/v1/login-links", headers={**person, **SAME_ORIGIN})
    made_token = made.json()["url"].split("token=", 1)[1]
    another = await log_in(client, app)  # the banner's link: a login of its own
    form_of_model = await log_in(client, app, scope="form:f3")  # a model's form link

    forged = await client.post("/logout", headers={**person, "Origin": "http://evil.example"})
    assert forged.status_code == 403
    out = await client.post("/logout", headers={**person, **SAME_ORIGIN})
    assert out.status_code == 200 and out.json() == {"ok": True}
    assert "set-cookie" not in out.headers
    for ended in (person, minted, grandchild):
        assert (await client.get("/v1/forms/f1/who", headers=ended)).status_code == 401
    for token in (unused, unused_form, made_token):
        assert (await redeem(client, token)).status_code == 401
        assert (await client.get(f"/login?token={token}")).status_code == 401
    assert (await client.get("/v1/pads", headers=another)).status_code == 200
    assert (await client.get("/v1/forms/f3/who", headers=form_of_model)).status_code == 200
    again = await client.post("/logout", headers={**person, **SAME_ORIGIN})
    assert again.status_code == 200  # nothing left to end


async def test_a_signed_url_opens_one_download_while_its_session_lives(
    client: httpx.AsyncClient, app: FastAPI, manager: ScratchpadManager, workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    (manager.settings.home / "pads" / dir_name("data/team")).mkdir(parents=True)
    (workspace / "plot one.png").write_bytes(b"\x89PNG fake")
    (workspace / "other.txt").write_text("other")
    person = {**(await log_in(client, app)), **SAME_ORIGIN}
    path = "/v1/pads/data%2Fteam/files/plot%20one.png"

    async def sign(url: str, headers: dict[str, str] = person) -> httpx.Response:
        return await client.post("/v1/signed-urls", headers=headers, json={"url": url})

    made = await sign(f"{path}?download=true")
    assert made.status_code == 200 and made.headers["cache-control"] == "no-store", made.text
    url = made.json()["url"]
    assert url.startswith(f"{path}?download=true&sig=") and made.json()["expires_at"] > 0
    got = await client.get(url)  # no header: what a link or an <img> sends
    assert got.status_code == 200 and got.content == b"\x89PNG fake"
    assert got.headers["content-disposition"].startswith("attachment")
    signature = url.split("sig=", 1)[1]
    for bent in (
        f"{path}?sig={signature}",  # another query
        f"/v1/pads/data%2Fteam/files/other.txt?download=true&sig={signature}",  # another file
        f"{path}?download=true&sig={signature[:-2]}xx",  # another signature
        f"{path}?download=true&sig={signature}&sig={signature}",
        f"{path}?download=true&sig={signature.rsplit('.', 1)[0]}.m%C3%A4c",  # not even ASCII
        f"{path}?download=true&sig=..",
    ):
        assert (await client.get(bent)).status_code == 401, bent
    assert (await client.delete(url)).status_code == 401  # GET only
    plain = (await sign(path)).json()["url"]
    assert plain.startswith(f"{path}?sig=") and (await client.get(plain)).status_code == 200

    for refused, why in (
        ("/v1/pads", "only downloads on this server can be signed"),
        ("/v1/datasources/http-api-key/prod", "only downloads on this server can be signed"),
        ("http://elsewhere.example/v1/pads/main/notebook", "only downloads on this server"),
        ("http://[::1/v1/pads/main/notebook", "only downloads on this server"),
        ("/v1/pads/main/notebook#top", "only downloads on this server"),
        (f"{path}?sig=mine", "already has a 'sig' parameter"),
    ):
        answer = await sign(refused)
        assert answer.status_code == 400 and why in answer.json()["error"], answer.text
    assert (await sign(path, AUTH)).status_code == 403  # the key needs no signed URL
    form = {**(await log_in(client, app, scope="form:f1")), **SAME_ORIGIN}
    assert (await sign(path, form)).status_code == 403

    monkeypatch.setattr(browser_auth, "SIGNED_TTL_S", 0)
    expired = (await sign(path)).json()["url"]
    assert (await client.get(expired)).status_code == 401
    await client.post("/logout", headers=person)
    assert (await client.get(url)).status_code == 401  # its session ended


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ({"next": "//evil.example/"}, "next must be a path"),
        ({"next": "https://evil.example/"}, "next must be a path"),
        ({"next": "/\\evil.example"}, "next must be a path"),
        ({"next": "/ok\nSet-Cookie: x=y"}, "next must be a path"),
        ({"scope": "root"}, "unknown session scope"),
        ({"scope": "form:../x"}, "unknown session scope"),
        ({"nxt": "/"}, "nxt"),
    ],
)
async def test_bad_login_link_requests_say_what_to_send(
    client: httpx.AsyncClient, body: dict[str, str], problem: str
) -> None:
    answer = await client.post("/v1/login-links", headers=AUTH, json=body)
    assert answer.status_code == (422 if problem == "nxt" else 400), answer.text
    assert problem in answer.json()["error"]


async def test_a_link_for_a_form_opens_that_form_only(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    made = await client.post(
        "/v1/login-links", headers=AUTH, json={"next": "/connect/f1", "scope": "form:f1"}
    )
    answer = await redeem(client, made.json()["url"].split("token=", 1)[1])
    assert answer.json()["scope"] == "form:f1" and answer.json()["next"] == "/connect/f1"
    session = {HEADER: answer.json()["session"]}
    assert (await client.get("/v1/forms/f1/who", headers=session)).status_code == 200
    assert (await client.get("/v1/pads", headers=session)).status_code == 403


def assert_security_headers(response: httpx.Response) -> None:
    assert response.headers["content-security-policy"] == CSP
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["referrer-policy"] == "no-referrer"
    assert response.headers["x-frame-options"] == "DENY"


async def test_security_headers_on_json_static_pages_and_refusals(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    assert "'unsafe-inline'" not in CSP and "frame-ancestors 'none'" in CSP
    session = await log_in(client, app)
    for response in (
        await client.get("/v1/pads", headers=AUTH),
        await client.get("/static/app.js"),
        await client.get("/v1/pads", headers=session),
        await client.get("/"),
        await client.get("/v1/pads"),
        await client.get("/login?token=x"),
        await client.get("/healthz"),
    ):
        assert_security_headers(response)
    own = await client.get("/v1/sandboxed", headers=AUTH)
    assert own.headers["content-security-policy"] == "sandbox"  # the route's own, kept
    assert own.headers["x-frame-options"] == "SAMEORIGIN"
    assert own.headers["referrer-policy"] == "no-referrer"


async def test_security_headers_on_an_sse_stream(client: httpx.AsyncClient) -> None:
    body = {"name": "p", "code": "print('hi')\n1 + 1"}
    async with client.stream(
        "POST", "/scratchpad/execute-stream", headers=AUTH, json=body, timeout=60
    ) as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        assert_security_headers(stream)
        text = "".join([chunk async for chunk in stream.aiter_text()])
    frames = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]
    assert frames[-1]["type"] == "cell" and frames[-1]["cell"]["result"] == "2"


def test_the_access_log_never_holds_a_login_token() -> None:
    hide_tokens()
    hide_tokens()  # installed once
    access = logging.getLogger(ACCESS_LOGGER)
    assert sum(isinstance(f, HideTokens) for f in access.filters) == 1
    record = access.makeRecord(
        ACCESS_LOGGER, logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5", "GET", "/login?token=Tok-3n_x&next=1", "1.1", 303), None,
    )  # fmt: skip
    assert access.filter(record)
    line = record.getMessage()
    assert "Tok-3n_x" not in line and "/login?token=[hidden]&next=1" in line
    signed = access.makeRecord(
        ACCESS_LOGGER, logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5", "GET", "/v1/pads/p/notebook?sig=h.9.m-A_c", "1.1", 200), None,
    )  # fmt: skip
    assert access.filter(signed)
    assert signed.getMessage().count("/v1/pads/p/notebook?sig=[hidden] HTTP") == 1


def banner_lines(process: subprocess.Popen[str]) -> list[str]:
    """The serve banner, up to its last line (printed before the server answers)."""
    assert process.stdout is not None
    lines: list[str] = []
    while not lines or not lines[-1].lstrip().startswith("health:"):
        line = process.stdout.readline()
        assert line, f"the banner ended early: {lines}"
        lines.append(line.rstrip("\n"))
    return lines


def follow_login(url: str, link: str) -> str:
    """The session a login link gives (no bearer key anywhere): its page, then what the
    page's script does."""
    page = httpx.get(link, follow_redirects=False, timeout=10)
    assert page.status_code == 200 and "/static/login.js" in page.text, page.text
    token = link.split("token=", 1)[1]
    answer = httpx.post(f"{url}/login", json={"token": token}, timeout=10)
    assert answer.status_code == 200, answer.text
    return str(answer.json()["session"])


def test_over_a_real_server_the_banner_and_scratchpad_login_give_working_links(
    tmp_path: Path, hermetic_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SCRATCHPAD_API_KEY", KEY)
    with running_server(hermetic_env, tmp_path, KEY) as (url, process):
        banner = banner_lines(process)
        shown = [line.split()[-1] for line in banner if line.lstrip().startswith("web UI:")]
        assert len(shown) == 1 and shown[0].startswith(f"{url}/login?token=")
        session = follow_login(url, shown[0])
        assert httpx.get(f"{url}/v1/pads", headers={HEADER: session}).status_code == 200

        result = CliRunner().invoke(cli, ["login"])
        assert result.exit_code == 0, result.stderr
        printed = result.stdout.strip()
        assert printed.startswith(f"{url}/login?token=") and "\n" not in printed
        cli_session = follow_login(url, printed)
        assert httpx.get(f"{url}/v1/pads", headers={HEADER: cli_session}).status_code == 200

        made = httpx.post(f"{url}/v1/login-links", headers=AUTH, json={"next": "/"}).json()
        token = made["url"].split("token=", 1)[1]
        third = follow_login(url, made["url"])
        assert httpx.get(made["url"]).status_code == 401  # used
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=30)
    secrets_shown = [part for part in (token, session, cli_session, third) if part in output]
    assert not secrets_shown, output
