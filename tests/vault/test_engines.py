"""Known engines: their forms, secret fields and shape checks of submitted values."""

from __future__ import annotations

from typing import Any

import pytest

from scratchpad.errors import InvalidInputError
from scratchpad.vault.engines import (
    ENGINES,
    engine_form,
    get_engine,
    secret_fields,
    shape_problems,
)
from scratchpad.vault.forms import check_spec, is_secret_field

POSTGRES = {
    "host": "db.example.com",
    "port": "5432",
    "database": "app",
    "user": "reader",
    "password": "correct horse battery",
    "sslmode": "require",
}


def test_the_known_engines() -> None:
    expected = {"postgres", "mysql", "sqlite", "http-api-key", "http-basic", "redis", "s3"}
    assert expected <= set(ENGINES)
    assert get_engine("postgres") is ENGINES["postgres"]
    assert get_engine("posthog") is None


@pytest.mark.parametrize("name", sorted(ENGINES))
def test_every_engine_form_is_a_valid_spec(name: str) -> None:
    engine = ENGINES[name]
    form = engine_form(name)
    assert form["engine"] == name and form["title"] == f"Connect to {engine.label}"
    assert form["logo"] == engine.logo
    assert check_spec(form) == form
    assert [f["name"] for f in form["fields"]] == [f["name"] for f in engine.fields]
    secrets = secret_fields(name)
    assert secrets == {f["name"] for f in form["fields"] if f["type"] == "password"}
    assert all(is_secret_field(f) for f in form["fields"] if f["name"] in secrets)
    assert set(engine.shapes) <= {f["name"] for f in engine.fields}
    assert engine.problems({}, [f["name"] for f in engine.fields]) == {}  # all skipped


def test_engine_forms_are_fresh_copies() -> None:
    first = engine_form("postgres")
    first["fields"][0]["label"] = "changed"
    assert engine_form("postgres")["fields"][0]["label"] == "Host"
    assert engine_form("postgres")["form_id"] != first["form_id"]


def test_the_fields_of_each_engine() -> None:
    postgres = {f["name"]: f for f in engine_form("postgres")["fields"]}
    assert postgres["port"]["default"] == "5432"
    assert postgres["sslmode"]["type"] == "select" and not postgres["sslmode"]["required"]
    assert {f["name"]: f.get("default") for f in engine_form("mysql")["fields"]}["port"] == "3306"
    redis = {f["name"]: f for f in engine_form("redis")["fields"]}
    assert redis["port"]["default"] == "6379"
    assert not redis["password"]["required"] and not redis["db"]["required"]
    header = engine_form("http-api-key")["fields"][2]
    assert header["name"] == "header" and header["default"] == "Authorization"
    assert not header["required"]
    s3 = {f["name"]: f for f in engine_form("s3")["fields"]}
    assert not s3["bucket"]["required"] and not s3["endpoint_url"]["required"]
    assert secret_fields("s3") == {"secret_access_key"}
    assert secret_fields("sqlite") == frozenset() and secret_fields("posthog") == frozenset()


def test_an_unknown_engine_form_names_the_known_ones() -> None:
    with pytest.raises(InvalidInputError, match=r"unknown engine 'posthog'.*postgres, mysql"):
        engine_form("posthog")


def test_good_values_have_no_problems() -> None:
    assert ENGINES["postgres"].problems(POSTGRES, []) == {}
    assert ENGINES["postgres"].problems({**POSTGRES, "sslmode": ""}, []) == {}  # optional
    good = {
        "access_key_id": "AKIAEXAMPLE",
        "secret_access_key": "abc/def+ghi",
        "region": "eu-west-1",
        "bucket": "my.data-bucket",
        "endpoint_url": "https://minio.internal:9000",
    }
    assert ENGINES["s3"].problems(good, []) == {}
    assert ENGINES["redis"].problems({"host": "::1", "port": "6379", "db": "3"}, []) == {}
    api = {"base_url": "http://localhost:8080/v1", "api_key": "Bearer abc", "header": "X-Api-Key"}
    assert ENGINES["http-api-key"].problems(api, []) == {}


@pytest.mark.parametrize(
    ("engine", "changes", "field", "message"),
    [
        ("postgres", {"host": ""}, "host", "required: fill it in or skip it"),
        ("postgres", {"host": "   "}, "host", "required"),
        ("postgres", {"host": "https://db.example.com"}, "host", "without a scheme"),
        ("postgres", {"host": "db example.com"}, "host", "without spaces"),
        ("postgres", {"host": "db.example.com/app"}, "host", "not a host name"),
        ("postgres", {"port": "abc"}, "port", "not a port: give a whole number from 1 to 65535"),
        ("postgres", {"port": "0"}, "port", "not a port"),
        ("postgres", {"port": "65536"}, "port", "not a port"),
        ("postgres", {"port": " 5432"}, "port", "not a port"),
        ("postgres", {"sslmode": "strict"}, "sslmode", "'strict' is not one of disable, allow"),
        ("mysql", {"port": "33o6"}, "port", "not a port"),
        ("redis", {"db": "-1"}, "db", "not a database number"),
        ("sqlite", {"path": "a\nb"}, "path", "single line"),
        ("http-api-key", {"base_url": "api.example.com"}, "base_url", "not a URL"),
        ("http-api-key", {"base_url": "ftp://x.org"}, "base_url", "not a URL"),
        ("http-api-key", {"header": "X Api Key"}, "header", "not a header name"),
        ("http-basic", {"username": None}, "username", "required"),
        ("s3", {"region": "EU West"}, "region", "not a region"),
        ("s3", {"bucket": "ab"}, "bucket", "not a bucket name"),
        ("s3", {"secret_access_key": "abc def"}, "secret_access_key", "has spaces"),
        ("s3", {"endpoint_url": "minio:9000"}, "endpoint_url", "not a URL"),
    ],
)
def test_shape_problems_per_engine(
    engine: str, changes: dict[str, Any], field: str, message: str
) -> None:
    good = {
        "postgres": POSTGRES,
        "mysql": {k: v for k, v in POSTGRES.items() if k != "sslmode"} | {"port": "3306"},
        "redis": {"host": "localhost", "port": "6379"},
        "sqlite": {"path": "/data/app.db"},
        "http-api-key": {"base_url": "https://api.example.com", "api_key": "k" * 20},
        "http-basic": {"base_url": "https://api.example.com", "username": "u", "password": "p"},
        "s3": {"access_key_id": "AKIA1", "secret_access_key": "s" * 40, "region": "us-east-1"},
    }[engine]
    values = {k: v for k, v in {**good, **changes}.items() if v is not None}
    problems = ENGINES[engine].problems(values, [])
    assert list(problems) == [field]
    assert message in problems[field]
    assert ENGINES[engine].problems(values, [field]) == {}  # a skipped field is not checked


def test_a_value_that_is_not_text_is_a_problem() -> None:
    problems = ENGINES["postgres"].problems({**POSTGRES, "port": 5432}, [])  # type: ignore[dict-item]
    assert problems == {"port": "expected text, got int"}


def test_shape_problems_of_a_known_engine_cover_only_the_specs_fields() -> None:
    spec = check_spec(
        {
            "engine": "postgres",
            "title": "Connect",
            "fields": [
                {"name": "host", "required": True},
                {"name": "port"},
                {"name": "schema", "required": True},  # not an engine field: its own flag
            ],
        }
    )
    values = {"host": "https://db", "port": "x"}
    assert shape_problems(spec, values, []) == {
        "host": "give the host name only, without a scheme (e.g. db.example.com)",
        "port": "not a port: give a whole number from 1 to 65535",
        "schema": "required: fill it in or skip it",
    }  # no word about database, user or password: the form does not have them
    assert shape_problems(spec, values, ["host", "port", "schema"]) == {}


def test_shape_problems_of_a_custom_engine_check_required_flags_only() -> None:
    spec = check_spec(
        {
            "engine": "posthog",
            "title": "Connect to PostHog",
            "fields": [
                {"name": "host", "type": "url", "required": True, "skipable": False},
                {"name": "port"},
                {"name": "api_key", "type": "password", "required": True},
            ],
        }
    )
    assert shape_problems(spec, {"host": "", "port": "not a port", "api_key": "phx_1"}, []) == {
        "host": "required: fill it in"
    }
    assert shape_problems(spec, {"host": "x", "api_key": "phx_1"}, []) == {}


def test_shape_problems_follow_the_chosen_method() -> None:
    spec = check_spec(
        {
            "engine": "s3",
            "title": "Connect to S3",
            "fields": [{"name": "region", "required": True}],
            "methods": [
                {"id": "keys", "fields": [{"name": "access_key_id", "required": True}]},
                {"id": "profile", "fields": [{"name": "profile", "required": True}]},
            ],
            "auth_method": "profile",
        }
    )
    problems = shape_problems(spec, {"region": "Mars", "access_key_id": ""}, [])
    assert problems == {
        "region": "not a region: give one like us-east-1",
        "profile": "required: fill it in or skip it",
    }
