"""Read seed-domain files such as seeds/domains.txt.

Format, one seed per line::

    name | description | category

- Fields are separated by ``|`` and stripped of surrounding spaces. ``name``
  is required; ``description`` and ``category`` are optional, so ``name``,
  ``name | description`` and ``name | | category`` are all valid. At most
  three fields: a description cannot contain ``|``.
- A name is at most 80 characters and contains a letter or digit.
- Names are unique ignoring case, spacing and punctuation ("Hotel booking"
  and "hotel-booking" are the same seed); a repeat is reported with the line
  numbers of both.
- Lines whose first non-space character is ``#`` are comments; blank lines are
  ignored. The file is UTF-8.

Every problem raises InputError with one line naming the file and line.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

from synth.artifacts import Seed
from synth.errors import InputError

MAX_NAME_CHARS = 80
MAX_FIELDS = 3
_NON_ALNUM = re.compile(r"[\W_]+")


def name_key(name: str) -> str:
    """Identity of a name for duplicate checks: case, spacing and punctuation ignored."""
    return _NON_ALNUM.sub(" ", name.casefold()).strip()


def parse_seeds(text: str, source: str = "<seeds>") -> list[Seed]:
    """Parse seed-file text (format in the module docstring); `source` names it in errors."""
    seeds: list[Seed] = []
    first_line: dict[str, int] = {}  # name_key -> line number where it first appeared
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        where = f"{source}:{number}"
        fields = [field.strip() for field in line.split("|")]
        if len(fields) > MAX_FIELDS:
            raise InputError(
                f"{where}: {len(fields)} fields, expected at most {MAX_FIELDS} "
                "('name | description | category'; a description cannot contain '|')"
            )
        name, description, category = (fields + ["", ""])[:MAX_FIELDS]
        key = name_key(name)
        if not key:
            raise InputError(f"{where}: empty seed name; expected 'name | description | category'")
        if len(name) > MAX_NAME_CHARS:
            raise InputError(f"{where}: seed name is {len(name)} characters, at most {MAX_NAME_CHARS} allowed")
        if key in first_line:
            raise InputError(f"{where}: duplicate seed {name!r} (first on line {first_line[key]})")
        first_line[key] = number
        seeds.append(Seed(name=name, description=description, category=category.lower()))
    if not seeds:
        raise InputError(f"{source}: no seeds found; expected lines of 'name | description | category'")
    return seeds


def load_seeds(path: Path | str) -> list[Seed]:
    """Read and parse a seed file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: seed file not found") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte {exc.start}); save the seed file as UTF-8") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read seed file ({exc.strerror})") from None
    return parse_seeds(text, source=str(path))


def bundled_seeds_path() -> Path:
    """The >=100-domain list shipped with synth (seeds/domains.txt, package synth_seeds)."""
    return Path(str(resources.files("synth_seeds").joinpath("domains.txt")))


def load_bundled_seeds() -> list[Seed]:
    return load_seeds(bundled_seeds_path())
