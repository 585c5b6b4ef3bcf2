"""Settings, read once from ``SCRATCHPAD_*`` environment variables.

Build a ``Settings`` once and pass it down; nothing on a hot path should re-read the
environment. Tests build their own instance with small limits.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from scratchpad.errors import ConfigError

MIB = 1024 * 1024


class Settings(BaseSettings):
    """Every tunable of Scratchpad; each field is ``SCRATCHPAD_<FIELD>`` in the environment."""

    model_config = SettingsConfigDict(env_prefix="SCRATCHPAD_", extra="ignore", frozen=True)

    home: Path = Field(
        default_factory=lambda: Path.home() / ".scratchpad",
        description="Where pads, keys and databases live when no workspace is bound.",
    )

    # Cell timeouts (see scratchpad.runtime.timeouts.compute_timeouts).
    default_timeout_s: float = Field(120.0, gt=0, description="Total timeout with no estimate.")
    timeout_slack_s: float = Field(30.0, ge=0, description="Total is at least estimate + slack.")
    max_timeout_s: float = Field(3600.0, gt=0, description="Upper bound of any total timeout.")
    min_inactivity_s: float = Field(30.0, gt=0, description="Inactivity timeout lower bound.")
    max_inactivity_s: float = Field(60.0, gt=0, description="Inactivity timeout upper bound.")
    interrupt_grace_s: float = Field(
        2.0, gt=0, description="How long an interrupted kernel may take to answer before a kill."
    )
    heartbeat_s: float = Field(
        2.0, gt=0, description="How often a kernel running a cell says it is alive."
    )

    # Kernels and their environments.
    output_cap_bytes: int = Field(
        8 * MIB, ge=1024, description="Bytes kept per stream per cell (head + tail)."
    )
    logs_cap_chars: int = Field(
        1 * MIB, ge=1024, description="Characters of progress messages and notes kept per cell."
    )
    display_cap_bytes: int = Field(
        8 * MIB, ge=1024, description="Bytes of display() outputs and figures kept per cell."
    )
    history_max_bytes: int = Field(
        32 * MIB,
        ge=64 * 1024,
        description="Size of a pad's stored history; beyond it the oldest cells are folded away.",
    )
    kernel_start_timeout_s: float = Field(30.0, gt=0)
    sleep_after_s: float = Field(
        900.0,
        ge=0,
        description="A pad idle this long sleeps: its kernel stops until its next use (0: never).",
    )
    checkpoint_var_mb: int = Field(
        256, ge=1, description="Largest variable (or group sharing objects) a checkpoint saves."
    )
    checkpoint_pad_mb: int = Field(
        1024, ge=0, description="Largest checkpoint of a pad's variables; 0 turns checkpoints off."
    )
    checkpoint_keep: int = Field(2, ge=0, description="Earlier checkpoints kept (for revert).")
    checkpoint_sweep_cells: int = Field(
        50, ge=1, description="Every this many cells, every variable is checked for changes."
    )
    restore_timeout_s: float = Field(
        60.0, gt=0, description="How long a new kernel may take to restore its variables."
    )
    kernel_memory_limit_mb: int | None = Field(
        None,
        gt=0,
        description="Address-space limit of each process of a pad (RLIMIT_AS); off when "
        "unset. SCRATCHPAD_PAD_MEMORY_MB is the limit of a pad as a whole.",
    )
    pad_memory_mb: int | None = Field(
        None,
        ge=0,
        description="Memory all processes of one pad may hold together, in MiB (default: half "
        "of this machine's memory; 0: no limit).",
    )
    pad_processes: int = Field(
        512, ge=0, description="Processes (and threads) one pad may run at once (0: no limit)."
    )
    pad_cpu_weight: int = Field(
        50,
        ge=1,
        le=10000,
        description="CPU weight of a pad's processes beside the server's 100 (a nice value).",
    )
    pad_disk_mb: int = Field(
        10240,
        ge=0,
        description="Disk one pad's files may take, in MiB: its directory and what its "
        "workspace grows by (0: no limit).",
    )
    venv_create_attempts: int = Field(3, ge=1)
    install_timeout_s: float = Field(120.0, gt=0)
    auto_install: bool = Field(
        False,
        description="When a cell fails on a missing module, install its package (cv2 → "
        "opencv-python, ...), say so in the cell's logs and run the cell once more.",
    )
    compact_keep_cells: int = Field(5, ge=1, description="Cells kept whole by view().")

    sandbox: Literal["auto", "off", "require"] = Field(
        "auto",
        description="Confinement of pads (Landlock, namespaces, identity): auto (what this "
        "system has), off, or require (pads refuse to start without Landlock, or when a "
        "mechanism this system has fails).",
    )
    namespaces: Literal["auto", "off"] = Field(
        "auto",
        description="Namespaces for pads (the home hidden, a private /dev, processes held in a "
        "PID namespace, another identity under root): auto (where this system allows) or off "
        "(Landlock alone).",
    )
    pad_user: str = Field(
        "nobody",
        description="Who pads run as when the server runs as root: a user name or uid[:gid].",
    )

    # The vault (see scratchpad.vault).
    vault_key: str | None = Field(
        None, description="The vault's Fernet key, when no OS keyring is used."
    )
    vault_default_grant: Literal["all", "none"] = Field(
        "all", description="Connections a pad gets without grants of its own: all or none."
    )
    probe_model: str | None = Field(
        None,
        description="The model that tests submitted credentials, as 'provider:model' "
        "(default: the model setting).",
    )
    probe_timeout_s: float = Field(
        90.0, gt=0, description="Longest a credential probe may run before it is a failure."
    )
    form_wait_s: float = Field(
        600.0,
        gt=0,
        description="Longest an MCP request_credentials call waits for the person to fill in "
        "the form in their browser.",
    )

    # Observations (see scratchpad.observations).
    observations_db: Path | None = Field(
        None, description="The observation store's SQLite file; <home>/observations.db if unset."
    )
    observation_threshold_bytes: int = Field(
        4096, ge=0, description="Observations larger than this (as JSON) are offloaded."
    )
    observation_ttl_s: float = Field(3600.0, gt=0, description="Lifetime of a stored entry.")
    observation_full_cap_chars: int = Field(
        100_000, ge=1, description="Largest answer of read(mode='full')."
    )
    observation_grep_timeout_s: float = Field(
        10.0, gt=0, description="Longest one grep may search before it is refused as too slow."
    )
    observation_gc_interval_s: float = Field(
        600.0, gt=0, description="How often a running server deletes expired observations."
    )

    # Where pads run: here, or on a Scratchpad server.
    backend: Literal["local", "remote", "ray"] = Field(
        "local", description="local, remote (a Scratchpad server) or ray (a Ray cluster's nodes)."
    )
    remote_url: str | None = Field(None, description="The pad server, e.g. http://host:8765.")
    remote_api_key: str | None = Field(None, description="Bearer key of the pad server.")
    reconnect_s: float = Field(
        120.0, ge=0, description="How long a remote pad follows a cell whose stream dropped."
    )

    # Pads on a Ray cluster (SCRATCHPAD_BACKEND=ray).
    ray_address: str | None = Field(
        None, description="The Ray cluster (host:port, ray://...); unset: a Ray of this machine."
    )
    ray_trust_network: bool = Field(
        False, description="Allow a Ray cluster off this machine (its ports run anyone's code)."
    )
    ray_allow_no_auth: bool = Field(
        False, description="Allow a Ray cluster without token authentication (pads could use it)."
    )
    ray_store: Path | None = Field(
        None, description="A directory every Ray node reaches, for the pads (default: the home)."
    )
    ray_namespace: str = Field("scratchpad", min_length=1, description="Ray namespace of pads.")
    ray_place_timeout_s: float = Field(
        120.0, gt=0, description="How long a new pad's actor may wait for a node with room."
    )
    ray_cpus: float = Field(0.0, ge=0, description="CPUs a pad asks Ray for by default.")
    ray_gpus: float = Field(0.0, ge=0, description="GPUs a pad asks Ray for by default.")
    ray_memory_mb: int = Field(0, ge=0, description="Memory a pad asks Ray for (0: none).")

    # The HTTP server.
    api_key: str | None = Field(
        None, description="Bearer key of the server; generated into <home>/api_key if unset."
    )
    max_request_bytes: int = Field(
        10 * MIB, ge=1024, description="Larger request bodies are refused with 413."
    )
    max_upload_bytes: int = Field(
        100 * MIB,
        ge=1024,
        description="Largest file accepted by PUT /v1/pads/{name}/files/{path} (streamed to "
        "disk, never held in memory); larger uploads are refused with 413.",
    )
    session_ttl_s: float = Field(
        12 * 3600.0, gt=0, description="Lifetime of a browser session (from its login link)."
    )
    allowed_hosts: str = Field(
        "",
        description="More host[:port] names browsers may use for the server (comma-separated; "
        "no port: any), beside its loopback addresses and the bound one.",
    )
    http_keepalive_s: int = Field(
        75,
        ge=1,
        description="Seconds the server keeps an idle client connection open. Keep it well "
        "above every client's pool expiry (RemoteRuntime 1 s, httpx 5 s, aiohttp 15 s) and a "
        "proxy's upstream idle timeout: a server that closes first races the client's next "
        "request, which then fails with a reset and an unknown result.",
    )

    # Language models.
    model: str = Field(
        "anthropic:claude-sonnet-4-5",
        description="The model, as 'provider:model' or 'scripted:FILE'.",
    )
    llm_retry_budget_s: float = Field(60.0, ge=0, description="Time spent retrying a call.")
    llm_timeout_s: float = Field(600.0, gt=0, description="Timeout of one model request.")

    # The agent session loop.
    max_tool_rounds: int = Field(25, ge=1, description="Tool rounds per turn before wrap-up.")
    max_output_tokens: int = Field(4096, ge=1, description="max_tokens of each model call.")

    @property
    def observations_path(self) -> Path:
        return self.observations_db or self.home / "observations.db"

    @property
    def api_key_path(self) -> Path:
        """Where the server keeps the key it generated (when ``api_key`` is unset)."""
        return self.home / "api_key"

    @model_validator(mode="after")
    def _remote_needs_a_server(self) -> Settings:
        if self.backend == "remote":
            missing = [
                name
                for name, value in (
                    ("SCRATCHPAD_REMOTE_URL", self.remote_url),
                    ("SCRATCHPAD_REMOTE_API_KEY", self.remote_api_key),
                )
                if not value
            ]
            if missing:
                raise ValueError(f"SCRATCHPAD_BACKEND=remote needs {' and '.join(missing)}")
        return self

    @model_validator(mode="after")
    def _heartbeats_fit_the_inactivity_window(self) -> Settings:
        if self.min_inactivity_s < 2 * self.heartbeat_s:
            raise ValueError(
                f"SCRATCHPAD_MIN_INACTIVITY_S ({self.min_inactivity_s:g}) must be at least twice "
                f"SCRATCHPAD_HEARTBEAT_S ({self.heartbeat_s:g}), or quiet cells count as hung"
            )
        return self

    @field_validator("remote_url", mode="after")
    @classmethod
    def _remote_url_is_http(cls, value: str | None) -> str | None:
        parts = urlsplit(value or "")
        if value and (parts.scheme not in ("http", "https") or not parts.netloc):
            raise ValueError(
                f"{value!r} is not an http:// or https:// URL; give the pad server's address "
                "with its scheme, e.g. http://127.0.0.1:8765"
            )
        return value

    @field_validator("home", "observations_db", mode="after")
    @classmethod
    def _absolute(cls, value: Path | None) -> Path | None:
        """Paths made absolute at once: a process started elsewhere (the background server
        runs from the home) reads the same files."""
        return None if value is None else value.expanduser().absolute()

    @classmethod
    def load(cls, **overrides: object) -> Settings:
        """Read the environment; a bad value raises ConfigError naming the variable."""
        try:
            return cls(**overrides)  # type: ignore[arg-type]
        except ValidationError as exc:
            problems = "; ".join(
                (f"SCRATCHPAD_{'_'.join(str(p) for p in err['loc']).upper()}: " * bool(err["loc"]))
                + str(err["msg"]).removeprefix("Value error, ")
                for err in exc.errors()
            )
            raise ConfigError(
                f"Invalid settings: {problems}. Fix the variable(s) and retry."
            ) from exc

    def with_home(self, home: Path) -> Settings:
        """A copy whose home directory is ``home`` (used when a workspace is bound)."""
        return self.model_copy(update={"home": home})


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` (a name or an address) is this machine's loopback."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
