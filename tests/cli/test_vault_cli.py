"""``scratchpad vault``: on the files when no server runs (CliRunner), through the running
server when one does (real subprocesses) — values from hidden prompts, files or stdin."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from scratchpad.cli.app import app
from scratchpad.config import Settings
from scratchpad.vault import KEEP, Vault

runner = CliRunner()
SECRET = "cli-secret-value-1"


def vault(home: Path) -> Vault:
    return Vault(Settings(home=home), keyring=None)


def test_add_from_prompts_hidden_for_secrets(hermetic_env: Path) -> None:
    added = runner.invoke(
        app, ["vault", "add", "postgres", "prod", "--field", "host", "--secret", "pw"],
        input=f"db.local\n{SECRET}\n",
    )  # fmt: skip
    assert added.exit_code == 0, added.output
    assert SECRET not in added.output  # the hidden prompt does not echo
    assert vault(hermetic_env).load("postgres", "prod") == {"host": "db.local", "pw": SECRET}
    assert vault(hermetic_env).record("postgres", "prod")["secure_keys"] == ["pw"]


def test_add_from_a_file_and_from_stdin(hermetic_env: Path, tmp_path: Path) -> None:
    values = tmp_path / "values.env"
    values.write_text(f"host=db\npassword={SECRET}\n")
    assert runner.invoke(app, ["vault", "add", "pg", "--from-file", str(values)]).exit_code == 0
    body = json.dumps({"token": SECRET, "url": "https://api"})
    piped = runner.invoke(app, ["vault", "add", "api", "main", "--stdin"], input=body)
    assert piped.exit_code == 0, piped.output
    store = vault(hermetic_env)
    assert store.load("pg", "1") == {"host": "db", "password": SECRET}
    assert store.record("api", "main")["secure_keys"] == ["token"]
    listing = runner.invoke(app, ["vault", "ls", "--json"])
    assert {(e["engine"], e["name"]) for e in json.loads(listing.stdout)} == {
        ("api", "main"), ("pg", "1"),
    }  # fmt: skip
    shown = runner.invoke(app, ["vault", "show", "pg", "1"])
    assert json.loads(shown.stdout)["fields"] == {"host": "db", "password": KEEP}
    for output in (listing.output, shown.output, runner.invoke(app, ["vault", "ls"]).output):
        assert SECRET not in output


def test_edit_grant_revoke_rm_and_audit(hermetic_env: Path) -> None:
    vault(hermetic_env).save("pg", "prod", {"host": "a", "password": SECRET})
    kept = runner.invoke(app, ["vault", "edit", "pg", "prod"], input="b\n\n")  # Enter keeps
    assert kept.exit_code == 0, kept.output
    assert vault(hermetic_env).load("pg", "prod") == {"host": "b", "password": SECRET}
    cleared = runner.invoke(app, ["vault", "edit", "pg", "prod", "--remove", "host"])
    assert cleared.exit_code == 0 and vault(hermetic_env).load("pg", "prod") == {"password": SECRET}
    revoked = runner.invoke(app, ["vault", "revoke", "main", "pg", "prod"])
    assert "pad main gets: no connections" in revoked.stdout
    granted = runner.invoke(app, ["vault", "grant", "main", "pg", "prod"])
    assert "pad main gets: pg/prod" in granted.stdout
    assert runner.invoke(app, ["vault", "rm", "pg", "prod"]).exit_code == 0
    log = runner.invoke(app, ["vault", "audit", "--limit", "3"]).stdout
    assert "revoke pad=main pg/prod" in log and "delete pg/prod" in log and SECRET not in log


def test_errors_are_one_line(hermetic_env: Path) -> None:
    missing = runner.invoke(app, ["vault", "show", "pg", "nope"])
    assert missing.exit_code == 2 and "no connection pg/nope" in missing.stderr
    short = runner.invoke(app, ["vault", "add", "pg", "--secret", "pw"], input="abc\n")
    assert short.exit_code == 2 and "at least 6" in short.stderr
    empty = runner.invoke(app, ["vault", "add", "pg"])
    assert empty.exit_code == 2 and "no fields given" in empty.stderr
    negative = runner.invoke(app, ["vault", "audit", "--limit", "-3"])  # not HTTP words either
    assert negative.exit_code == 2
    assert negative.stderr.startswith("error: Invalid value for '--limit'")


def test_with_a_running_server_the_cli_goes_through_it_and_pads_rotate(
    hermetic_env: Path,
) -> None:
    env = {**os.environ, "SCRATCHPAD_HOME": str(hermetic_env)}

    def scratchpad(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "scratchpad.cli", *args]
        return subprocess.run(command, env=env, input=stdin, capture_output=True, text=True,
                              timeout=90)  # fmt: skip

    first = scratchpad("vault", "add", "pg", "prod", "--stdin", stdin=f"password={SECRET}\n")
    assert first.returncode == 0, first.stderr
    read = "os.environ.get('DS_PG_PROD__PASSWORD')"
    ran = scratchpad("exec", "p", f"import os; pid = os.getpid(); {read} == {SECRET!r}")
    assert ran.returncode == 0 and "True" in ran.stdout, ran.stdout + ran.stderr
    rotated = "second-secret-value"
    again = scratchpad("vault", "edit", "pg", "prod", "--stdin", stdin=f"password={rotated}\n")
    assert again.returncode == 0, again.stderr
    after = scratchpad("exec", "p", f"(os.getpid() == pid, {read} == {rotated!r})")
    assert "(True, True)" in after.stdout, after.stdout + after.stderr


def test_a_long_secret_such_as_a_private_key_is_saved_shown_and_scrubbed(
    hermetic_env: Path,
) -> None:
    """A PEM key or a service-account JSON runs to thousands of characters: saving it, listing
    the vault and printing it from a pad all work (no RecursionError), and it is scrubbed."""
    body = "".join(f"{n:04d}MIIEvQIBADANBgkqhkiG9w0BAQEFAASC" for n in range(80))  # 2,880 chars
    key = f"-----BEGIN PRIVATE KEY-----\n{body}\n-----END PRIVATE KEY-----"
    env = {**os.environ, "SCRATCHPAD_HOME": str(hermetic_env)}

    def scratchpad(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "scratchpad.cli", *args]
        return subprocess.run(command, env=env, input=stdin, capture_output=True, text=True,
                              timeout=90)  # fmt: skip

    added = scratchpad("vault", "add", "gcp", "svc", "--stdin", stdin=json.dumps({"key": key}))
    assert added.returncode == 0, added.stderr[-500:]
    listed = scratchpad("vault", "ls")
    assert listed.returncode == 0 and "gcp" in listed.stdout, listed.stderr[-500:]
    ran = scratchpad("exec", "p", "import os; print(os.environ['DS_GCP_SVC__KEY'])")
    try:
        assert ran.returncode == 0, ran.stderr[-500:]
        assert "[DS_GCP_SVC__KEY]" in ran.stdout and body not in ran.stdout
    finally:
        scratchpad("server", "stop")
