"""Grants (default all / none), the audit log (names only), the workspace .env parser."""

from __future__ import annotations

import json
import stat

import pytest

from scratchpad.config import Settings
from scratchpad.errors import VaultNotFoundError
from scratchpad.vault import Vault
from scratchpad.vault.dotenv import parse

SECRET = "audit-never-sees-this"


def make(settings: Settings, default: str = "all") -> Vault:
    vault = Vault(Settings(home=settings.home, vault_default_grant=default), keyring=None)
    vault.save("postgres", "prod", {"password": SECRET})
    vault.save("mysql", "dev", {"host": "h"})
    return vault


def test_default_all_then_revoke_and_grant(settings: Settings) -> None:
    vault = make(settings)
    assert vault.grants("p") == [("mysql", "dev"), ("postgres", "prod")]
    vault.revoke("p", "postgres", "prod")
    assert vault.grants("p") == [("mysql", "dev")]
    assert vault.grants("other") == [("mysql", "dev"), ("postgres", "prod")]
    vault.grant("p", "postgres", "prod")
    assert vault.grants("p") == [("mysql", "dev"), ("postgres", "prod")]
    path = settings.home / "vault" / "grants.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_default_none_gives_only_what_is_granted(settings: Settings) -> None:
    vault = make(settings, "none")
    assert vault.grants("p") == []
    vault.grant("p", "mysql", "dev")
    assert vault.grants("p") == [("mysql", "dev")]
    with pytest.raises(VaultNotFoundError):
        vault.grant("p", "nope", "x")


def test_deleting_a_connection_forgets_its_grants(settings: Settings) -> None:
    vault = make(settings, "none")
    vault.grant("p", "mysql", "dev")
    vault.delete("mysql", "dev")
    vault.save("mysql", "dev", {"host": "h"})
    assert vault.grants("p") == []


def test_audit_has_names_only(settings: Settings) -> None:
    vault = make(settings)
    vault.revoke("pad-a", "postgres", "prod")
    vault.delete("mysql", "dev")
    path = settings.home / "vault" / "audit.jsonl"
    assert SECRET not in path.read_text()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    events = [(e["event"], e.get("pad"), e["engine"], e["name"]) for e in vault.audit.read()]
    assert events == [
        ("save", None, "postgres", "prod"),
        ("save", None, "mysql", "dev"),
        ("revoke", "pad-a", "postgres", "prod"),
        ("delete", None, "mysql", "dev"),
    ]
    assert [e["event"] for e in vault.audit.read(limit=1)] == ["delete"]
    assert all(set(json.loads(line)) <= {"at", "event", "pad", "engine", "name"}
               for line in path.read_text().splitlines())  # fmt: skip


def test_dotenv_shapes() -> None:
    text = (
        "# comment\n\nexport A=1\nB = 'single # kept'\nC=\"dq \\n line\"\n"
        "D=bare # comment\nnot a line\nE='unclosed\n"
    )
    assert parse(text) == {"A": "1", "B": "single # kept", "C": "dq \n line", "D": "bare"}


def test_only_dotenv_values_that_hold_secrets_are_scrubbed() -> None:
    from scratchpad.vault.dotenv import secrets_of

    env = {
        "MODE": "production",
        "HOST": "localhost",
        "DB_NAME": "analytics",
        "API_HOST": "api.example.com",
        "SLACK_TOKEN": "plain-words-token",
        "DATABASE_URL": "postgres://app:Hunter2-pw@db:5432/app",
        "SIGNING": "a8Fq02kLmZ7xWq91bN3c",
        "DB_PASS": "Db-pa55!word",  # passwords spelt short
        "PGPASS": "pg!Secr3t#1x",
        "MYSQL_PWD": "My_Sql9_pwdX",
        "ADMIN_PWD": "Adm1n!Pwd%xq",
        "db_pw": "lower-case-pw",
        "SEED": "QxZvTkWmRpLnBfHjYcDsGtKa",  # letters only, mixed like a random token
        "PWD": "/home/analyst/project",  # the shell's working directories
        "OLDPWD": "/home/analyst",
        "GREETING": "ThisIsAVeryLongCamelCaseName",  # letters, but words
        "WORD": "supercalifragilisticexpialidocious",
        "PYTHONPATH": "/usr/lib/python3.11/site-packages",  # a path, with digits
        "CLUSTER": "production-eu-west-1-cluster",  # words with a digit
    }
    assert sorted(secrets_of(env)) == sorted(
        [
            ("plain-words-token", "SLACK_TOKEN"),
            ("postgres://app:Hunter2-pw@db:5432/app", "DATABASE_URL"),
            ("Hunter2-pw", "DATABASE_URL"),
            ("a8Fq02kLmZ7xWq91bN3c", "SIGNING"),
            ("Db-pa55!word", "DB_PASS"),
            ("pg!Secr3t#1x", "PGPASS"),
            ("My_Sql9_pwdX", "MYSQL_PWD"),
            ("Adm1n!Pwd%xq", "ADMIN_PWD"),
            ("lower-case-pw", "db_pw"),
            ("QxZvTkWmRpLnBfHjYcDsGtKa", "SEED"),
        ]
    )


def test_process_variables_named_like_passwords_are_secrets() -> None:
    from scratchpad.vault.sources import environment_secrets

    environ = {"MYSQL_PWD": "a1", "PGPASS": "b2", "PWD": "/x", "OLDPWD": "/y", "PATH": "/z"}
    assert sorted(environment_secrets(environ)) == [("a1", "MYSQL_PWD"), ("b2", "PGPASS")]


def test_a_dotenv_value_with_a_nul_is_skipped() -> None:
    from scratchpad.vault.dotenv import parse

    assert parse('A="x\\0y"\nB=ok\n'.replace("\\0", "\0")) == {"B": "ok"}
