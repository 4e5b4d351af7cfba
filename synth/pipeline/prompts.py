"""Prompts are jinja2 templates in templates/prompts/, one file per prompt.

A prompt file renders to a system part and a user part separated by a line
`=== user ===`; `render_prompt` returns them as chat messages.
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any

import jinja2

USER_MARKER = "=== user ==="


@functools.cache
def _environment(folder: str) -> jinja2.Environment:
    root = resources.files("synth_templates").joinpath(folder)
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(root)),
        undefined=jinja2.StrictUndefined,  # a missing variable is a bug, not an empty string
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render_template(folder: str, name: str, **context: Any) -> str:
    return _environment(folder).get_template(name).render(**context)


def render_prompt(name: str, **context: Any) -> list[dict[str, str]]:
    """Render templates/prompts/<name>.j2 into [system?, user] messages."""
    text = render_template("prompts", f"{name}.j2", **context)
    system, sep, user = text.partition(USER_MARKER)
    if not sep:
        return [{"role": "user", "content": text.strip()}]
    return [{"role": "system", "content": system.strip()}, {"role": "user", "content": user.strip()}]
