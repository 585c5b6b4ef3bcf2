"""Print the SSE transcript of one successful probe over a real server, and how long it took.

    .venv/bin/python -m tests.connect.transcript

A scripted probe model (a status, a field status, one cell that reads ``credentials.env`` and
calls a local bearer-token service, then ``report_success``) and a throwaway home; the cell's
code is cut in the output. It checks that neither submitted value appears in the stream.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import httpx

from tests.connect.services import HTTP_CHECK, TOKEN, bearer_service, http_form
from tests.server_helpers import running_server

SCRIPT = [
    [{"name": "set_status", "input": {"text": "Calling GET /me"}},
     {"name": "set_field_status", "input": {"name": "api_key", "status": "Validating…"}}],
    [{"name": "scratchpad", "input": {"action": "exec", "name": "probe", "code": HTTP_CHECK,
                                      "one_line_description": "Call GET /me with the key"}}],
    [{"name": "report_success", "input": {"summary": "The service answered as alice."}}],
    "Done.",
]  # fmt: skip


def main() -> None:
    place = Path(tempfile.mkdtemp(prefix="scratchpad-transcript-"))
    try:
        (place / "probe.json").write_text(json.dumps(SCRIPT))
        os.environ["SCRATCHPAD_PROBE_MODEL"] = f"scripted:{place / 'probe.json'}"
        with bearer_service() as url, running_server(place / "home", place, "key") as (server, _):
            body = {"form_spec": http_form(form_id="fm_3c9e1a7b20"),
                    "values": {"base_url": url, "api_key": TOKEN}, "skipped": []}  # fmt: skip
            started = time.perf_counter()
            answer = httpx.post(f"{server}/v1/datavault/submissions", json=body,
                                headers={"Authorization": "Bearer key"}, timeout=120)  # fmt: skip
            took = time.perf_counter() - started
        for frame in answer.text.strip().split("\n\n"):
            name, data = frame.split("\n", 1)
            event = json.loads(data.removeprefix("data: "))
            if event.get("thought_role") == "scratchpad.start":
                event["thought"]["code"] = event["thought"]["code"][:40] + "…"
            print(f"{name}\ndata: {json.dumps(event, ensure_ascii=False)}\n")
        leaked = TOKEN in answer.text or url in answer.text
        print(f"submission to verdict: {took:.2f} s; a submitted value in the stream: {leaked}")
    finally:
        shutil.rmtree(place, ignore_errors=True)


if __name__ == "__main__":
    main()
