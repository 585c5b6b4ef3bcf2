"""The public API, pinned: each public package's exact ``__all__``, every name importable,
documented and defined in Scratchpad, and every error class reachable from the root. A
rename that would break users' imports fails here first; change the lists below on purpose
(and README's API section with them)."""

from __future__ import annotations

import importlib
import inspect
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from scratchpad.errors import error_classes

ROOT = Path(__file__).resolve().parents[1]
ERRORS = frozenset(error_classes())  # every class of the tree, exported by the root too
PUBLIC: dict[str, frozenset[str]] = {
    "scratchpad": ERRORS
    | {
        "Cell", "DisplayEvent", "LocalRuntime", "ObservationStore", "OutputEvent",
        "ProgressEvent", "RemoteRuntime", "ScratchpadManager", "ScratchpadRuntime",
        "ScriptedProvider", "Session", "Settings", "Vault",
    },
    "scratchpad.agent": frozenset({"Session", "SessionEvent"}),
    "scratchpad.connect": frozenset(
        {"Submission", "Submissions", "run_probe", "saved_submission", "stage"}
    ),
    "scratchpad.llm": frozenset({
        "Complete", "ImageBlock", "Message", "Provider", "Response", "ScriptedProvider",
        "StreamEvent", "TextBlock", "TextDelta", "ToolCall", "ToolResultBlock", "ToolSpec",
        "ToolUseBlock", "ToolUseDelta", "ToolUseEnd", "ToolUseStart", "Usage",
        "generate_object", "parse_arguments", "with_retries",
    }),
    "scratchpad.memory": frozenset({
        "AgentConfig", "AgentPaths", "AgentStatus", "CycleAgent", "CycleRecord", "CycleResult",
        "Dispatcher", "HistoryEntry", "Model", "ProviderModel", "ScriptedModel", "State", "Step",
        "ToolsConfig", "agent_status", "cycle_history", "default_state", "init_agent",
        "load_config", "load_state", "model_from_spec", "parse_reply", "read_records",
        "save_state",
    }),
    "scratchpad.observations": frozenset(
        {"ObservationEntry", "ObservationInfo", "ObservationStore", "ReadResult"}
    ),
    "scratchpad.scrub": frozenset({
        "BAD_PNG", "MIN_SECRET_CHARS", "REDACTED", "Scrubber", "StreamScrubber", "register",
        "scrub", "scrub_bundle", "scrub_logs", "scrubber",
    }),
    "scratchpad.tools": frozenset({
        "ScratchpadObserver", "ShellOptions", "ToolDef", "ToolHints", "ToolOutcome",
        "ToolRegistry", "ToolSessionContext", "builtin_registry", "read_image_tool",
        "read_observation_tool", "scratchpad_tool",
    }),
    "scratchpad.vault": frozenset({"KEEP", "Vault"}),
}  # fmt: skip
EXPORTED = sorted((package, name) for package, names in PUBLIC.items() for name in names)


@pytest.mark.parametrize("package", sorted(PUBLIC))
def test_each_public_package_exports_exactly_its_names(package: str) -> None:
    module = importlib.import_module(package)
    assert sorted(module.__all__) == module.__all__, "keep __all__ sorted"
    assert set(module.__all__) == PUBLIC[package]
    assert set(module.__all__) <= set(dir(module))
    star: dict[str, Any] = {}
    exec(f"from {package} import *", star)  # what a star import gives is __all__, no more
    assert set(star) - {"__builtins__"} == PUBLIC[package]


def test_no_other_package_declares_a_public_api() -> None:
    """A new package with an ``__all__`` is a new public surface: pin it above."""
    declared = set()
    for init in sorted((ROOT / "src" / "scratchpad").rglob("__init__.py")):
        package = ".".join(init.parent.relative_to(ROOT / "src").parts)
        if hasattr(importlib.import_module(package), "__all__"):
            declared.add(package)
    assert declared == set(PUBLIC)


@pytest.mark.parametrize(("package", "name"), EXPORTED, ids=[f"{p}.{n}" for p, n in EXPORTED])
def test_each_name_is_importable_ours_and_documented(package: str, name: str) -> None:
    module = importlib.import_module(package)
    value = getattr(module, name)
    if inspect.isclass(value) or inspect.isfunction(value):
        assert value.__module__.startswith("scratchpad."), f"{name} is not Scratchpad's own"
        doc = value.__doc__ or ""
        assert doc.strip() and not doc.startswith(f"{name}("), f"{package}.{name} has no docstring"
    else:  # a constant: its package says what it is
        source = inspect.getsource(importlib.import_module(_home_of(module, value, name)))
        assert re.search(rf'^{name}\b[^\n]*(#[^\n]+|\n""")', source, re.MULTILINE) or name in (
            module.__doc__ or ""
        ), f"{package}.{name} is not documented"


def test_the_root_stays_cheap_to_import() -> None:
    """``import scratchpad`` loads none of what it exports until a name is used."""
    code = (
        "import sys, scratchpad\n"
        "heavy = [m for m in sys.modules if m.startswith('scratchpad.') "
        "and m not in ('scratchpad._lazy',)]\n"
        "assert not heavy, heavy\n"
        "assert 'ast' not in sys.modules or 'ast' in before\n"
    ).replace("import sys, scratchpad", "import sys\nbefore = set(sys.modules)\nimport scratchpad")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, env=_env())


def test_readme_imports_only_public_names() -> None:
    """Every ``from scratchpad... import`` of the README names a public name (or a module)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    checked = 0
    for package, names in re.findall(r"^from (scratchpad[\w.]*) import ([\w, ]+)$", readme, re.M):
        for name in (n.strip() for n in names.split(",")):
            module = importlib.import_module(package)
            if package in PUBLIC and not inspect.ismodule(getattr(module, name, None)):
                assert name in PUBLIC[package], f"README imports {package}.{name}"
            assert hasattr(module, name) or importlib.import_module(f"{package}.{name}")
            checked += 1
    assert checked >= 10


def _home_of(module: Any, value: object, name: str) -> str:
    """The module that defines the constant ``name`` re-exported by ``module``."""
    for candidate in list(sys.modules.values()):
        if getattr(candidate, "__name__", "").startswith(module.__name__) and (
            vars(candidate).get(name) is value and candidate is not module
        ):
            source = inspect.getsource(candidate)
            if re.search(rf"^{name}\s*[:=]", source, re.MULTILINE):
                return str(candidate.__name__)
    return str(module.__name__)


def _env() -> dict[str, str]:
    import os

    return {**os.environ, "PYTHONPATH": str(ROOT / "src")}
