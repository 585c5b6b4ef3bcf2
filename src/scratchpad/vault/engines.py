"""The engines the vault knows: a ready form for each and shape checks of submitted values.

Any engine name may be used (a custom engine's form says what it needs). A known one gets a
form without the model writing it, and its values are checked for shape before a probe
spends time on them: a port that is not a number, a host with a scheme, a URL without one.
Shape only (pure, no I/O); whether the credentials work is the probe's question.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any

from scratchpad.errors import InvalidInputError
from scratchpad.vault.formcheck import check_spec, is_http_url
from scratchpad.vault.forms import fields_of

PORT_RE = re.compile(r"[0-9]{1,5}")
INDEX_RE = re.compile(r"[0-9]{1,6}")
HEADER_RE = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}")  # an HTTP header name (token)
REGION_RE = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
BUCKET_RE = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
SSL_MODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")


@dataclass(frozen=True)
class Engine:
    """A known engine: its form fields (as ``check_spec`` takes them; secrets are of type
    password) and, per field, the shape its value must have."""

    name: str
    label: str
    fields: tuple[dict[str, Any], ...]
    logo: str
    help_url: str | None = None
    shapes: Mapping[str, str] = dataclass_field(default_factory=dict)  # field -> SHAPES key

    def problems(self, values: Mapping[str, str], skipped: Collection[str]) -> dict[str, str]:
        """Field name → what is wrong with its value (shape only; skipped fields pass)."""
        found: dict[str, str] = {}
        for form_field in self.fields:
            name = form_field["name"]
            if name in skipped:
                continue
            problem = field_problem(form_field, values.get(name), self.shapes.get(name))
            if problem:
                found[name] = problem
        return found


def field_problem(form_field: Mapping[str, Any], value: object, shape: str | None) -> str | None:
    """What is wrong with one submitted value, or None: required and empty, not one of a
    select's options, or not of the shape named."""
    problem = required_problem(form_field, value)
    if problem or not isinstance(value, str) or not value.strip():
        return problem
    options = [
        option.get("value") if isinstance(option, dict) else option
        for option in form_field.get("options") or []
    ]
    if options and value not in options:
        return f"{value!r} is not one of {', '.join(map(str, options))}"
    check = SHAPES.get(shape or "")
    return check(value) if check else None


def required_problem(form_field: Mapping[str, Any], value: object) -> str | None:
    """Whether a value is missing (or not text) where the field says it is required."""
    if value is not None and not isinstance(value, str):
        return f"expected text, got {type(value).__name__}"
    if (value and value.strip()) or not form_field.get("required"):
        return None
    return "required: fill it in" + (" or skip it" if form_field.get("skipable", True) else "")


def _host(value: str) -> str | None:
    if "://" in value:
        return "give the host name only, without a scheme (e.g. db.example.com)"
    if any(char.isspace() for char in value) or "/" in value or len(value) > 253:
        return "not a host name: give one like db.example.com or 10.0.0.5, without spaces or /"
    return None


def _port(value: str) -> str | None:
    if PORT_RE.fullmatch(value) and 1 <= int(value) <= 65535:
        return None
    return "not a port: give a whole number from 1 to 65535"


def _url(value: str) -> str | None:
    return None if is_http_url(value) else "not a URL: give one like https://api.example.com"


def _matching(pattern: re.Pattern[str], problem: str) -> Callable[[str], str | None]:
    return lambda value: None if pattern.fullmatch(value) else problem


SHAPES: dict[str, Callable[[str], str | None]] = {
    "host": _host,
    "port": _port,
    "url": _url,
    "index": _matching(INDEX_RE, "not a database number: give a whole number such as 0"),
    "path": _matching(re.compile(r"[^\x00\n\r]+"), "not a path: give one on a single line"),
    "header": _matching(HEADER_RE, "not a header name: give one like Authorization or X-Api-Key"),
    "region": _matching(REGION_RE, "not a region: give one like us-east-1"),
    "bucket": _matching(BUCKET_RE, "not a bucket name: 3 to 63 lower-case letters, digits, . or -"),
    "token": _matching(re.compile(r"\S+"), "has spaces: paste it without spaces or line breaks"),
}


def _field(name: str, label: str, kind: str = "text", required: bool = True, **extra: Any) -> Any:
    return {"name": name, "label": label, "type": kind, "required": required, **extra}


def _server(port: str) -> tuple[dict[str, Any], ...]:
    """Host, port, database, user and password: a database server's fields."""
    return (
        _field("host", "Host", placeholder="db.example.com"),
        _field("port", "Port", default=port),
        _field("database", "Database"),
        _field("user", "User"),
        _field("password", "Password", "password"),
    )


SERVER_SHAPES = {"host": "host", "port": "port"}
SSL_MODE = _field(
    "sslmode",
    "SSL mode",
    "select",
    False,
    default="prefer",
    options=[{"value": mode, "label": mode} for mode in SSL_MODES],
)

ENGINES: dict[str, Engine] = {
    engine.name: engine
    for engine in (
        Engine(
            "postgres",
            "PostgreSQL",
            (*_server("5432"), SSL_MODE),
            "database",
            "https://www.postgresql.org/docs/current/libpq-connect.html",
            SERVER_SHAPES,
        ),
        Engine("mysql", "MySQL", _server("3306"), "database", None, SERVER_SHAPES),
        Engine(
            "sqlite",
            "SQLite",
            (_field("path", "Database file", placeholder="/data/app.db"),),
            "database",
            None,
            {"path": "path"},
        ),
        Engine(
            "http-api-key",
            "HTTP API (API key)",
            (
                _field("base_url", "Base URL", "url", placeholder="https://api.example.com"),
                _field("api_key", "API key", "password"),
                _field("header", "Header", required=False, default="Authorization"),
            ),
            "key",
            None,
            {"base_url": "url", "header": "header"},
        ),
        Engine(
            "http-basic",
            "HTTP API (basic auth)",
            (
                _field("base_url", "Base URL", "url", placeholder="https://api.example.com"),
                _field("username", "User name"),
                _field("password", "Password", "password"),
            ),
            "lock",
            None,
            {"base_url": "url"},
        ),
        Engine(
            "redis",
            "Redis",
            (
                _field("host", "Host", placeholder="localhost"),
                _field("port", "Port", default="6379"),
                _field("password", "Password", "password", required=False),
                _field("db", "Database number", required=False, default="0"),
            ),
            "database",
            None,
            {**SERVER_SHAPES, "db": "index"},
        ),
        Engine(
            "s3",
            "Amazon S3",
            (
                _field("access_key_id", "Access key ID"),
                _field("secret_access_key", "Secret access key", "password"),
                _field("region", "Region", default="us-east-1"),
                _field("bucket", "Bucket", required=False),
                _field(
                    "endpoint_url",
                    "Endpoint URL",
                    "url",
                    required=False,
                    help="For S3-compatible storage (MinIO, R2, ...); empty for AWS.",
                ),
            ),
            "cloud",
            "https://docs.aws.amazon.com/IAM/latest/UserGuide/id_credentials_access-keys.html",
            {
                "access_key_id": "token",
                "secret_access_key": "token",
                "region": "region",
                "bucket": "bucket",
                "endpoint_url": "url",
            },
        ),
    )
}


def get_engine(name: str) -> Engine | None:
    return ENGINES.get(name)


def engine_form(name: str) -> dict[str, Any]:
    """A complete, checked form spec for a known engine."""
    engine = get_engine(name)
    if engine is None:
        known = ", ".join(ENGINES)
        raise InvalidInputError(
            f"unknown engine {name!r}; the known engines are {known} (for another, write the "
            "form's fields yourself)"
        )
    spec: dict[str, Any] = {
        "engine": engine.name,
        "title": f"Connect to {engine.label}",
        "logo": engine.logo,
        "fields": [dict(form_field) for form_field in engine.fields],
    }
    if engine.help_url:
        spec["help_url"] = engine.help_url
    return check_spec(spec)


def secret_fields(name: str) -> frozenset[str]:
    """The fields of a known engine whose values are secrets (none for an unknown one)."""
    engine = get_engine(name)
    fields = engine.fields if engine else ()
    return frozenset(f["name"] for f in fields if f.get("type") == "password")


def shape_problems(
    spec: dict[str, Any], values: Mapping[str, str], skipped: Collection[str]
) -> dict[str, str]:
    """Field name → problem for a submission of ``spec``'s form (its chosen method's fields):
    the spec's own required flags, and for a known engine its checks of the fields the spec
    has; a custom engine's values are otherwise taken as they are."""
    fields = fields_of(spec)
    found: dict[str, str] = {}
    for form_field in fields:
        name = str(form_field.get("name"))
        problem = None if name in skipped else required_problem(form_field, values.get(name))
        if problem:
            found[name] = problem
    engine = get_engine(str(spec.get("engine")))
    if engine is not None:
        names = {form_field.get("name") for form_field in fields}
        found.update({k: v for k, v in engine.problems(values, skipped).items() if k in names})
    return found
