"""Shared pieces of the artifact models: the frozen base model and slugs."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict


TOOL_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


SLUG_RE = re.compile(r"[^a-z0-9]+")


def slugify(text: str, max_len: int = 48) -> str:
    """Lower-case ascii slug used for env ids and file names."""
    slug = SLUG_RE.sub("_", text.lower()).strip("_")
    return (slug[:max_len].rstrip("_")) or "item"


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
