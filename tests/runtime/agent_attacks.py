"""What a hostile model does, in agent mode, to change what drives it (issue item 3): through a
real cycle with a scripted model, a cell of its pad and its ``shell`` tool go for the agent's
rules, config, state, snapshots and logs, and for the keys of both homes. Each scenario runs
as root or as an unprivileged user (tests/unprivileged.py) and answers what it got out, as
JSON-able data; the tests in test_agent_confinement.py say what must hold."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from pathlib import Path
from typing import Any

import yaml

from scratchpad.config import Settings
from scratchpad.memory import CycleAgent, ScriptedModel, init_agent
from scratchpad.scrub import scrubber
from scratchpad.server.auth import resolve_api_key
from scratchpad.vault.store import Vault
from tests.memory.helpers import fixed_clock, reply
from tests.runtime.attacks import gone

CYCLE = "20250304_050607"  # the first cycle's id under fixed_clock()
FORGED = "".join(reversed("DEGROF-DENWP"))  # what a write leaves; never spelt out in a cell

# A cell that tries every way it has into the agent directory, and says how each ended
# ("DONE", or the errno of its refusal) in a file of its workspace.
ATTACK_CELL = """
import errno, json, os
root, report = {root!r}, {report!r}
forged = "".join(reversed({forged_reversed!r}))
SHELL_ON = "\\ntools: {{shell: true}}\\n"

def append(path, text=forged):
    with open(path, "a") as file:
        file.write(text)

def replace_from_workspace(target):
    staged = os.path.join(os.path.dirname(report), "staged")
    with open(staged, "w") as file:
        file.write(forged)
    os.replace(staged, target)

tries = {{
    "append shell to config.yaml": lambda: append(root + "/config.yaml", SHELL_ON),
    "rewrite RULES.md": lambda: open(root + "/RULES.md", "w").write(forged),
    "replace RULES.md": lambda: replace_from_workspace(root + "/RULES.md"),
    "remove config.yaml": lambda: os.unlink(root + "/config.yaml"),
    "write active.yaml": lambda: append(root + "/scratchpad/active.yaml"),
    "edit the before snapshot": lambda: append(root + "/scratchpad/{cycle}_before.yaml"),
    "add a snapshot": lambda: append(root + "/scratchpad/99990101_000000_after.yaml"),
    "append to cycles.jsonl": lambda: append(root + "/logs/cycles.jsonl"),
    "append to the cycle log": lambda: append(root + "/logs/cycle_{cycle}.log"),
    "move logs away": lambda: os.rename(root + "/logs", root + "/logs.old"),
    "archive a note": lambda: (os.makedirs(root + "/notes_archive", exist_ok=True),
                               append(root + "/notes_archive/{cycle}.md")),
    "link the state elsewhere": lambda: os.symlink("/tmp", root + "/scratchpad/linked"),
    "create a file in the agent directory": lambda: append(root + "/new.txt"),
    "read the pads' vault key": lambda: open(root + "/.scratchpad/vault.key").read(),
}}
answer = {{}}
for what, action in tries.items():
    try:
        action()
    except OSError as exc:
        answer[what] = errno.errorcode.get(exc.errno, str(exc.errno))
    else:
        answer[what] = "DONE"
with open(report, "w") as file:
    json.dump(answer, file)
sorted(answer.values())
"""


def _agent(place: Path, config: dict[str, Any]) -> Path:
    root = place / "agent"
    init_agent(root)
    (root / "config.yaml").write_text(yaml.safe_dump(config))
    (root / "workspace").mkdir(exist_ok=True)
    return root


def _snapshot(root: Path) -> dict[str, bytes | None]:
    """The agent's config and rules as they are (None: gone)."""
    files = {name: root / name for name in ("config.yaml", "RULES.md")}
    return {name: path.read_bytes() if path.exists() else None for name, path in files.items()}


def _forged_files(root: Path) -> list[str]:
    """Files of the agent directory, outside its workspace and its pads' checkpoints (the
    pad's own variables, which only its kernel reads), that hold what a write forged."""
    found = []
    for path in root.rglob("*"):
        parts = path.relative_to(root).parts
        checkpoint = len(parts) > 3 and parts[:2] == (".scratchpad", "pads")
        checkpoint = checkpoint and parts[3].startswith("checkpoint")
        ours = path.is_relative_to(root / "workspace") or checkpoint
        if path.is_file() and not ours and FORGED.encode() in path.read_bytes():
            found.append(str(path.relative_to(root)))
    return sorted(found)


def _next_cycle(root: Path) -> dict[str, Any]:
    """What the next cycle, run as `scratchpad agent run` would (config and rules from the
    directory), offers its model."""
    model = ScriptedModel([reply("done")])
    CycleAgent(root, model).run()
    system, user = model.prompts[0]
    return {"offers_shell": "- shell:" in user, "rules": system}


def cell_attacks(place: Path) -> dict[str, Any]:
    """A cell of the agent's pad tries to change its rules, config, state, snapshots and logs;
    then the next cycle runs. The cell's report, what changed, what the next cycle offered."""
    root = _agent(place, {"tools": {"pads": True, "shell": False}})
    before = _snapshot(root)
    cell = ATTACK_CELL.format(
        root=str(root),
        report=str(root / "workspace" / "report.json"),
        forged_reversed=FORGED[::-1],
        cycle=CYCLE,
    )
    replies = [reply("scratchpad", action="exec", name="main", code=cell), reply("done")]
    CycleAgent(root, ScriptedModel(replies), clock=fixed_clock()).run()
    report = root / "workspace" / "report.json"
    return {
        "cell": json.loads(report.read_text()) if report.exists() else None,
        "changed": [name for name, data in _snapshot(root).items() if before[name] != data],
        "forged_files": _forged_files(root),
        "next_cycle": _next_cycle(root),
        "rules": (before["RULES.md"] or b"").decode(),
    }


def _keys(place: Path) -> dict[str, str]:
    """The person's server key and vault key, and the agent's pads' vault key, made the way
    a server and the vault make them; the scrubber then forgets them (a fresh process)."""
    settings = Settings.load()
    api_key = resolve_api_key(settings)
    secret = {"host": "db", "password": "a-database-password-1"}
    Vault(settings, keyring=None).save("postgres", "prod", secret)
    pads = settings.with_home(place / "agent" / ".scratchpad")
    Vault(pads, keyring=None).save("postgres", "prod", secret)
    scrubber().reset()
    return {
        "api_key": api_key,
        "vault_key": (settings.home / "vault.key").read_text().strip(),
        "pads_vault_key": (pads.home / "vault.key").read_text().strip(),
    }


def shell_attacks(place: Path, sleep: str, tagged: str) -> dict[str, Any]:
    """The agent's ``shell`` tool (enabled) reads the keys of both homes and lists them,
    writes outside its workspace, leaves two sleeps running detached (``sleep`` seconds
    without its environment, ``tagged`` with it; each its token), and prints keys that
    leaked into its workspace. Each command's output as the model saw it, the keys, what
    changed, and what still ran after the cycle (killed then)."""
    root = _agent(place, {"tools": {"pads": False, "shell": True}})
    keys = _keys(place)
    home, pad_home = Settings.load().home, root / ".scratchpad"
    (root / "workspace" / "leaked.txt").write_text("".join(f"{v}\n" for v in keys.values()))
    before = _snapshot(root)
    commands = {
        "READ": f"cat {home}/api_key {home}/vault.key {pad_home}/vault.key",
        "LIST": f"for d in {root} {pad_home} {home}; do ls -A $d; done 2>&1 | sed 's|.*/||'",
        "WRITE": f"echo x >> {root}/config.yaml; echo x > {root}/RULES.md; "
        f"touch {place}/outside {root}/new; mkdir -p sub && echo ok > sub/inside.txt",
        "STRAY": f"setsid sh -c 'env -i sleep {sleep} >/dev/null 2>&1 &'; "
        f"setsid sh -c 'sleep {tagged} >/dev/null 2>&1 &'",
        "LEAK": "cat leaked.txt",
    }
    replies = [reply("shell", command=f"echo {tag}; {cmd}") for tag, cmd in commands.items()]
    model = ScriptedModel([*replies, reply("done")])
    CycleAgent(root, model, clock=fixed_clock()).run()
    notes = yaml.safe_load((root / "scratchpad" / "active.yaml").read_text())["notes"]
    return {
        "outputs": {tag: _output(notes, tag) for tag in commands},
        "notes": notes,
        "keys": keys,
        "changed": [name for name, data in _snapshot(root).items() if before[name] != data],
        "outside": [str(p) for p in (place / "outside", root / "new") if p.exists()],
        "inside": (root / "workspace" / "sub" / "inside.txt").exists(),
        "left_running": _killed(sleep),
        "left_running_tagged": _killed(tagged),
        "offered_shell": "- shell:" in model.prompts[0][1],
    }


def _killed(token: str) -> list[int]:
    """The processes of ``token`` still there after a while; killed, so none outlives the
    test."""
    left = asyncio.run(gone(token))
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return left


def _output(notes: str, tag: str) -> str:
    """The output of the shell command that began by echoing ``tag``, as noted."""
    start = notes.index(f"→ {tag}\n") + len(f"→ {tag}\n")
    ends = [notes.find(mark, start) for mark in ("\n[TOOL]", "\n[COMPLETED]")]
    return notes[start : min(end for end in ends if end >= 0)]


def unprivileged_answer(stdout: str) -> Any:
    lines = [line for line in stdout.splitlines() if line.startswith("ANSWER ")]
    return json.loads(lines[-1].removeprefix("ANSWER ")) if lines else None


SCRIPT = """
import json
from pathlib import Path
from tests.runtime import agent_attacks
answer = agent_attacks.{scenario}(Path.cwd(), *{args!r})
print("ANSWER", json.dumps(answer))
"""


def nobody_script(scenario: str, *args: object) -> str:
    """The script that runs ``scenario`` as an unprivileged user (see tests/unprivileged.py)."""
    return SCRIPT.format(scenario=scenario, args=args)
