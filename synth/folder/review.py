"""review.json: a reviewer's approve/reject decision on one env folder.

    {"decision": "approved" | "rejected", "note": str, "reviewer": str, "at": "<ISO timestamp>"}

`synth view` writes it; `synth export`, `synth serve` and `synth rollout` skip rejected envs
unless told to include them. An env with no review.json is undecided.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Any

from synth.atomic import write_json_atomic
from synth.errors import InputError
from synth.folder.files import env_file_exists, read_optional_json

REVIEW_FILE = "review.json"
DECISIONS = ("approved", "rejected")


def read_review(env_dir: Path | str) -> dict[str, Any] | None:
    """The env's decision, or None when it has none; raises InputError when review.json is malformed."""
    path = Path(env_dir) / REVIEW_FILE
    try:
        data = read_optional_json(env_dir, REVIEW_FILE)
    except InputError as exc:  # a link, a FIFO, too big, not JSON: never followed or waited on
        raise InputError(f"{path} is unreadable ({exc}); fix it or delete it to clear the decision") from None
    if data is None:
        return None
    if not isinstance(data, dict) or data.get("decision") not in DECISIONS:
        raise InputError(f"{path}: 'decision' must be one of {', '.join(DECISIONS)}; fix it or delete it")
    return data


def write_review(env_dir: Path | str, decision: str, note: str = "", reviewer: str = "") -> dict[str, Any]:
    if decision not in DECISIONS:
        raise InputError(f"decision must be one of {', '.join(DECISIONS)}, not {decision!r}")
    root = Path(env_dir)
    if not env_file_exists(root, "env.json"):
        raise InputError(f"{root} is not an env folder (no env.json); nothing to review")
    review = {"decision": decision, "note": note.strip(), "reviewer": reviewer.strip(),
              "at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
    write_json_atomic(root / REVIEW_FILE, review)
    return review


def rejection(env_dir: Path | str) -> str | None:
    """Why an exporter or server should leave this env out, or None to keep it.

    A rejected env is left out, and so is one whose review.json is unreadable
    (its reviewer's intent is unknown, so it is not shipped by accident)."""
    try:
        review = read_review(env_dir)
    except InputError as exc:
        return str(exc)
    if review and review["decision"] == "rejected":
        note = f": {review['note']}" if review.get("note") else ""
        return f"rejected in review.json{note} (pass --include-rejected to include it)"
    return None
