"""What the probe's model is told: a technical brief built for one submission.

The brief names the engine, where the values are (a ``.env`` file in the pad's working
directory) and the variables in it, and the roster of the form's fields — filled, empty or
skipped, per method when the form has several — but never a value.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scratchpad.connect.submissions import Submission
from scratchpad.vault.forms import fields_of
from scratchpad.vault.names import env_word

ENV_FILE_NAME = "credentials.env"
PROBE_PAD = "probe"
USER_MESSAGE = "Test the connection now, then give your verdict."

READER = """\
    import json
    creds = {}
    for line in open("credentials.env", encoding="utf-8"):
        key, _, raw = line.rstrip("\\n").partition("=")
        creds[key] = json.loads(raw)"""


def env_variable(field: str) -> str:
    """The flat name a field has in the probe's ``.env`` file."""
    return f"DS_{env_word(field)}"


def probe_prompt(submission: Submission, env_path: Path, timeout_s: float) -> str:
    form = submission.form
    variables = [env_variable(n) for n in submission.filled() if n not in submission.skipped]
    return "\n".join(
        [
            f"You are a connection prober. Your only job: find out whether one set of "
            f"credentials for the engine {submission.engine!r} ({form['title']}) works.",
            "",
            "A person typed the values into a form. They are in the file "
            f"{env_path} (`{ENV_FILE_NAME}` in the working directory of your pad "
            f'{PROBE_PAD!r}), one KEY="value" line per field, the value JSON-escaped. '
            "Read it inside the pad, for example:",
            READER,
            f"Variables in the file: {', '.join(variables) or 'none'}.",
            "",
            *_roster(submission),
            "",
            "Rules:",
            "- Never print, return, log or repeat a credential value, not even part of one; "
            "print only what the service answered (a status, a version, a row count).",
            f"- Use the scratchpad tool (pad {PROBE_PAD!r}) to connect the way a client of "
            "this engine would, with short network timeouts, and make the smallest read-only "
            "request that proves the credentials work (e.g. SELECT 1, or one GET). Install a "
            "client library with action install when the standard library is not enough.",
            "- Tell the person what you are doing with set_status, and set_field_status "
            "on a field you check (status null clears it).",
            "- End with exactly one verdict: report_success (summary: what worked), "
            "report_failure (error: the diagnosis a person reads; follow_up: one line on what "
            "to fix), or request_extra_field (fields the service needs that the form did not "
            "ask for, and why). If you call more than one, the last one counts.",
            f"- You have {timeout_s:g} seconds in all; do not retry the same failing request.",
        ]
    )


def _roster(submission: Submission) -> list[str]:
    methods = submission.form.get("methods") or []
    if not methods:
        return ["Fields:", *_field_lines(submission, fields_of(submission.form), "  ")]
    chosen = submission.method_id
    lines = ["The form offers several ways to authenticate; the person chose the one marked *."]
    shared = submission.form.get("fields") or []
    if shared:
        lines += ["Fields of every method:", *_field_lines(submission, shared, "  ")]
    for method in methods:
        mark = "*" if method["id"] == chosen else "-"
        lines.append(f"{mark} method {method['id']!r} ({method.get('label', method['id'])}):")
        lines += _field_lines(submission, method.get("fields") or [], "    ")
    return lines


def _field_lines(submission: Submission, fields: list[dict[str, Any]], indent: str) -> list[str]:
    lines = []
    for field in fields:
        name = field["name"]
        if name in submission.skipped:
            state = "skipped"
        elif submission.values.get(name, "") != "":
            state = f"filled ({env_variable(name)})"
        else:
            state = "empty"
        kind = field.get("type", "text")
        required = ", required" if field.get("required") else ""
        label = field.get("label", name)
        lines.append(f"{indent}{name} ({label}; {kind}{required}): {state}")
    return lines
