"""The user prompt of each step: the current state, the answer format, the offered tools.

The rules (``RULES.md``) are the system prompt and say what the agent is for; this prompt
says how to answer, which is the dispatcher's contract, so it lives in code beside it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from scratchpad.memory.dispatcher import DONE, UPDATE
from scratchpad.memory.state import State, dump_state

ANSWER_FORMAT = f"""\
Answer with exactly one JSON object and nothing else. One of:
- {{"tool": "{UPDATE}", "args": {{...}}}}: change your state. completed_tasks is extended \
with the list you give, pending_actions is replaced by yours, any other key is set.
- {{"tool": "{DONE}", "args": {{"summary": "..."}}}}: the current task is finished; it moves \
to completed_tasks, the next pending action becomes current_task, and this cycle ends.
- {{"tool": "<name>", "args": {{...}}}}: call one of the tools below; the call and the \
first 300 characters of its result are appended to your notes."""


def build_prompt(
    state: State,
    *,
    cycle_id: str,
    iteration: int,
    max_iterations: int,
    tools: Sequence[dict[str, Any]],
    fragments: Sequence[str] = (),
) -> str:
    """The prompt for one step, built from the state as it is now."""
    parts = [
        f"Cycle {cycle_id}, step {iteration} of {max_iterations}. Your state:",
        f"```yaml\n{dump_state(state).rstrip()}\n```",
        ANSWER_FORMAT,
        "Tools:\n" + "\n".join(describe_tool(tool) for tool in tools) if tools else "Tools: none",
        *fragments,
    ]
    return "\n\n".join(parts) + "\n"


def describe_tool(tool: dict[str, Any]) -> str:
    """``- name: description`` and one line per argument (type, required, description)."""
    schema = tool.get("input_schema") or {}
    required = set(schema.get("required") or [])
    lines = [f"- {tool['name']}: {tool.get('description', '').strip()}"]
    for name, spec in (schema.get("properties") or {}).items():
        kind = spec.get("type", "any")
        if "enum" in spec:
            kind = " | ".join(json.dumps(choice) for choice in spec["enum"])
        flag = "required" if name in required else "optional"
        lines.append(f"    {name} ({kind}, {flag}): {spec.get('description', '')}".rstrip())
    return "\n".join(lines)
