"""Browser sessions, in-process (httpx ASGITransport): login links, the session cookie, the
guard's Host / Origin / form-scope checks, the HTML refusals and the security headers."""

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
from scratchpad.runtime.manager import ScratchpadManager
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
COOKIE = "scratchpad_session"


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


async def log_in(client: httpx.AsyncClient, app: FastAPI, scope: str = "all") -> dict[str, str]:
    """The cookie header of a fresh session of ``scope``."""
    token = sessions_of(app).grant(scope)
    answer = await client.get(f"/login?token={token}")
    assert answer.status_code == 200, answer.text
    session_id = answer.headers["set-cookie"].split(";")[0].split("=", 1)[1]
    client.cookies.clear()  # each test says which cookie it sends
    return {"Cookie": f"{COOKIE}={session_id}"}


async def test_a_login_link_sets_a_strict_httponly_cookie_that_reaches_the_api(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    link = sessions_of(app).link(BASE, next_path="/#/pads/main")
    assert link.startswith(f"{BASE}/login?token=") and "pads" not in link
    answer = await client.get(link)
    assert answer.status_code == 200 and "<script" not in answer.text
    # On from a page of this site, not by a redirect: a redirect that a link on another site
    # started does not carry a SameSite=Strict cookie.
    assert '<meta http-equiv="refresh" content="0; url=/#/pads/main">' in answer.text
    assert 'href="/#/pads/main"' in answer.text
    cookie = answer.headers["set-cookie"]
    name_value, *attributes = [part.strip() for part in cookie.split(";")]
    assert name_value.startswith(f"{COOKIE}=") and len(name_value) > len(COOKIE) + 40
    assert sorted(attributes) == ["HttpOnly", "Path=/", "SameSite=Strict"]  # no Secure
    client.cookies.clear()
    pads = await client.get("/v1/pads", headers={"Cookie": name_value})
    assert pads.status_code == 200 and pads.json() == {"pads": []}
    assert (await client.get("/v1/pads")).status_code == 401  # the cookie is what let it in


async def test_a_token_works_once_and_an_expired_one_not_at_all(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    token = sessions_of(app).grant()
    assert (await client.get(f"/login?token={token}")).status_code == 200
    expired = sessions_of(app).grant(ttl_s=0)
    for used in (token, expired, "made-up", ""):
        again = await client.get(f"/login?token={used}")
        assert again.status_code == 401
        assert again.headers["content-type"].startswith("text/html")
        assert "set-cookie" not in again.headers
        assert "used already, it expired" in again.text and "scratchpad login" in again.text
        assert "<script" not in again.text


def test_a_session_ends_after_its_lifetime() -> None:
    sessions = BrowserSessions(session_ttl_s=0)
    login = sessions.redeem(sessions.grant())
    assert login is not None and login.scope == "all"
    assert sessions.scope_of(login.session_id) is None
    lasting = BrowserSessions(session_ttl_s=3600)
    kept = lasting.redeem(lasting.grant("form:f1"))
    assert kept is not None and lasting.scope_of(kept.session_id) == "form:f1"
    lasting.forget(kept.session_id)
    assert lasting.scope_of(kept.session_id) is None


async def test_the_session_ttl_setting_reaches_the_app(manager: ScratchpadManager) -> None:
    settings = Settings(home=manager.settings.home, session_ttl_s=5)
    app = create_app(ScratchpadManager(settings=settings), api_key=KEY, origin=BASE)
    assert sessions_of(app).session_ttl_s == 5


async def test_cookie_state_changes_need_the_servers_own_origin(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    cookie = await log_in(client, app)
    for origin in ("http://evil.example", "http://127.0.0.1:9999", "null", BASE + ".evil.com"):
        foreign = await client.post("/v1/login-links", headers={**cookie, "Origin": origin})
        assert foreign.status_code == 403, origin
        assert foreign.json()["type"] == "Forbidden"
        assert "only the server's own pages" in foreign.json()["error"]
    missing = await client.post("/v1/login-links", headers=cookie)
    assert missing.status_code == 403 and "without an Origin" in missing.json()["error"]
    own = await client.post("/v1/login-links", headers={**cookie, **SAME_ORIGIN})
    assert own.status_code == 200 and own.json()["url"].startswith(f"{BASE}/login?token=")
    reading = await client.get("/v1/pads", headers=cookie)  # reads need no Origin
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


async def test_a_foreign_host_is_refused_to_cookies_and_login_links(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    cookie = await log_in(client, app)
    rebound = {**cookie, "Host": "attacker.example:8765"}
    answer = await client.get("/v1/pads", headers=rebound)
    assert answer.status_code == 403
    assert "SCRATCHPAD_ALLOWED_HOSTS" in answer.json()["error"]
    token = sessions_of(app).grant()
    login = await client.get(f"/login?token={token}", headers={"Host": "attacker.example:8765"})
    assert login.status_code == 403 and "set-cookie" not in login.headers
    for twin in ("localhost:8765", "[::1]:8765", "LOCALHOST:8765"):
        assert (await client.get("/v1/pads", headers={**cookie, "Host": twin})).status_code == 200
    for wrong in ("localhost:8766", "127.0.0.1"):
        assert (await client.get("/v1/pads", headers={**cookie, "Host": wrong})).status_code == 403


async def test_allowed_hosts_let_more_names_in(manager: ScratchpadManager) -> None:
    hosts = OwnHosts(BASE, "box.lan, proxy.example:443 ,")
    assert hosts.allows("box.lan:8765") and hosts.allows("box.lan:1") and hosts.allows("box.lan")
    assert hosts.allows("proxy.example:443") and not hosts.allows("proxy.example:444")
    assert not hosts.allows("evil.example:8765") and not hosts.allows("")
    settings = Settings(home=manager.settings.home, allowed_hosts="box.lan")
    app = create_app(ScratchpadManager(settings=settings), api_key=KEY, origin=BASE)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://box.lan:8765") as http:
        cookie = await log_in(http, app)
        assert (await http.get("/v1/pads", headers=cookie)).status_code == 200


async def test_a_form_session_reaches_its_form_and_nothing_else(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    cookie = await log_in(client, app, scope="form:f1")
    page = await client.get("/connect/f1", headers=cookie)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    answer = await client.get("/v1/forms/f1/who", headers=cookie)
    assert answer.json() == {"auth": "form:f1", "form": "f1"}
    staged = await client.get("/v1/datavault/submissions/sub_000000000000", headers=cookie)
    assert staged.json()["type"] == "SubmissionNotFoundError"  # past the guard
    post = {**cookie, **SAME_ORIGIN}
    submit = await client.post("/v1/datavault/submissions", headers=post, json={})
    assert submit.status_code == 422  # past the guard, refused by the route for its body
    for method, path in (
        ("GET", "/v1/pads"),
        ("GET", "/connect/f2"),
        ("GET", "/v1/forms/f2"),
        ("GET", "/"),
        ("POST", "/v1/login-links"),
        ("POST", "/scratchpad/start"),
        ("DELETE", "/v1/forms/f1"),
    ):
        refused = await client.request(method, path, headers=post)
        assert refused.status_code == 403, (method, path)
        assert refused.json() == {
            "error": "this browser session may only fill in form 'f1'; open the login link "
            "printed by `scratchpad serve` for the rest",
            "type": "Forbidden",
        }


async def test_bearer_and_full_sessions_have_no_form_scope(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    answer = await client.get("/v1/forms/f1/who", headers=AUTH)
    assert answer.json() == {"auth": "bearer", "form": None}
    cookie = await log_in(client, app)
    assert (await client.get("/v1/forms/f1/who", headers=cookie)).json() == {
        "auth": "all",
        "form": None,
    }


async def test_pages_without_a_session_explain_how_to_log_in(client: httpx.AsyncClient) -> None:
    page = await client.get("/")
    assert page.status_code == 401 and page.headers["content-type"].startswith("text/html")
    assert "scratchpad login" in page.text and "scratchpad serve" in page.text
    assert "<script" not in page.text
    api = await client.get("/v1/pads")
    assert api.status_code == 401 and api.json()["type"] == "Unauthorized"
    assert api.headers["www-authenticate"] == 'Bearer realm="scratchpad"'
    stale = await client.get("/", headers={"Cookie": f"{COOKIE}=not-a-session"})
    assert stale.status_code == 401 and "scratchpad login" in stale.text
    assert '<a href="/">Open this page again</a>' in stale.text  # a same-site step
    for path, shown in (("/docs", 'href="/docs"'), ("//evil.example/x", "evil.example")):
        page = await client.get(httpx.URL(BASE + path))
        assert page.status_code == 401 and page.request.url.path == path
        assert (shown in page.text) == (path == "/docs"), path  # never a link elsewhere


async def test_logout_forgets_the_session_and_clears_the_cookie(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    cookie = await log_in(client, app)
    out = await client.post("/logout", headers={**cookie, **SAME_ORIGIN})
    assert out.status_code == 200 and out.json() == {"ok": True}
    assert out.headers["set-cookie"].startswith(f"{COOKIE}=; Max-Age=0;")
    client.cookies.clear()
    assert (await client.get("/v1/pads", headers=cookie)).status_code == 401
    again = await log_in(client, app)
    forged = await client.post("/logout", headers={**again, "Origin": "http://evil.example"})
    assert forged.status_code == 403
    assert (await client.get("/v1/pads", headers=again)).status_code == 200


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
    answer = await client.get(made.json()["url"])
    assert answer.status_code == 200 and "url=/connect/f1" in answer.text
    session = answer.headers["set-cookie"].split(";")[0]
    client.cookies.clear()
    assert (await client.get("/v1/pads", headers={"Cookie": session})).status_code == 403


def assert_security_headers(response: httpx.Response) -> None:
    assert response.headers["content-security-policy"] == CSP
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["referrer-policy"] == "no-referrer"
    assert response.headers["x-frame-options"] == "DENY"


async def test_security_headers_on_json_static_pages_and_refusals(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    assert "'unsafe-inline'" not in CSP and "frame-ancestors 'none'" in CSP
    cookie = await log_in(client, app)
    for response in (
        await client.get("/v1/pads", headers=AUTH),
        await client.get("/static/app.js"),
        await client.get("/", headers=cookie),
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


def banner_lines(process: subprocess.Popen[str]) -> list[str]:
    """The serve banner, up to its last line (printed before the server answers)."""
    assert process.stdout is not None
    lines: list[str] = []
    while not lines or not lines[-1].lstrip().startswith("health:"):
        line = process.stdout.readline()
        assert line, f"the banner ended early: {lines}"
        lines.append(line.rstrip("\n"))
    return lines


def follow_login(link: str) -> str:
    """The session cookie a login link gives (no bearer key anywhere)."""
    answer = httpx.get(link, follow_redirects=False, timeout=10)
    assert answer.status_code == 200, answer.text
    return answer.headers["set-cookie"].split(";")[0]


def test_over_a_real_server_the_banner_and_scratchpad_login_give_working_links(
    tmp_path: Path, hermetic_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SCRATCHPAD_API_KEY", KEY)
    with running_server(hermetic_env, tmp_path, KEY) as (url, process):
        banner = banner_lines(process)
        shown = [line.split()[-1] for line in banner if line.lstrip().startswith("web UI:")]
        assert len(shown) == 1 and shown[0].startswith(f"{url}/login?token=")
        cookie = follow_login(shown[0])
        assert httpx.get(f"{url}/v1/pads", headers={"Cookie": cookie}).status_code == 200
        page = httpx.get(f"{url}/", headers={"Cookie": cookie})
        assert page.status_code == 200 and "<title>Scratchpad</title>" in page.text

        result = CliRunner().invoke(cli, ["login"])
        assert result.exit_code == 0, result.stderr
        printed = result.stdout.strip()
        assert printed.startswith(f"{url}/login?token=") and "\n" not in printed
        cli_cookie = follow_login(printed)
        assert httpx.get(f"{url}/v1/pads", headers={"Cookie": cli_cookie}).status_code == 200

        made = httpx.post(f"{url}/v1/login-links", headers=AUTH, json={"next": "/"}).json()
        token = made["url"].split("token=", 1)[1]
        session = follow_login(made["url"]).split("=", 1)[1]
        assert httpx.get(made["url"]).status_code == 401  # used
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=30)
    secrets_shown = [
        part for part in (token, session, cli_cookie.split("=", 1)[1]) if part in output
    ]
    assert not secrets_shown, output
