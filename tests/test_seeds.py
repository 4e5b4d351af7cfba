"""Seed-file parsing: the documented format, one-line errors naming file and line, the bundled list."""

from __future__ import annotations

from pathlib import Path

import pytest

from synth.errors import InputError
from synth.pipeline.seeds import bundled_seeds_path, load_bundled_seeds, load_seeds, name_key, parse_seeds

GOOD = """\
# comment line
hotel booking | rooms, rates and reservations | Travel

  veterinary clinic | pets, owners and visits
   # indented comment
grocery delivery
tax filing portal | | government
"""


def write(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "seeds.txt"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


def one_line_error(path: Path) -> str:
    with pytest.raises(InputError) as caught:
        load_seeds(path)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_good_file_parses_all_field_counts(tmp_path):
    seeds = load_seeds(write(tmp_path, GOOD))
    assert [(s.name, s.description, s.category) for s in seeds] == [
        ("hotel booking", "rooms, rates and reservations", "travel"),
        ("veterinary clinic", "pets, owners and visits", ""),
        ("grocery delivery", "", ""),
        ("tax filing portal", "", "government"),
    ]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("hotel | rooms | travel | extra", "4 fields"),
        (" | a description | travel", "empty seed name"),
        ("--- | punctuation only", "empty seed name"),
        ("x" * 81 + " | too long", "81 characters"),
    ],
)
def test_malformed_line_names_file_and_line(tmp_path, line, expected):
    path = write(tmp_path, f"# header\ngood seed | fine | misc\n{line}\n")
    message = one_line_error(path)
    assert message.startswith(f"{path}:3: ")
    assert expected in message


def test_duplicates_are_rejected_with_both_line_numbers(tmp_path):
    path = write(tmp_path, "Hotel Booking | a\ncar rental\n\nhotel-booking | b\n")
    message = one_line_error(path)
    assert message.startswith(f"{path}:4: ")
    assert "first on line 1" in message


def test_name_key_ignores_case_spacing_and_punctuation():
    assert name_key("  Hotel   Booking! ") == name_key("hotel-booking") == "hotel booking"
    assert name_key("hotel booking") != name_key("hotel bookings")


def test_empty_missing_and_binary_files_are_one_line_errors(tmp_path):
    assert "no seeds found" in one_line_error(write(tmp_path, "# only a comment\n\n"))
    assert "not found" in one_line_error(tmp_path / "absent.txt")
    assert "not UTF-8" in one_line_error(write(tmp_path, b"hotel \xff\xfe booking\n"))


def test_parse_seeds_names_its_source():
    with pytest.raises(InputError, match=r"^inline:2: "):
        parse_seeds("ok\na | b | c | d", source="inline")


def test_bundled_domains_parse_with_at_least_100_distinct_domains():
    assert bundled_seeds_path().name == "domains.txt"
    seeds = load_bundled_seeds()
    assert len({name_key(s.name) for s in seeds}) == len(seeds) >= 100
    assert all(s.description and s.category for s in seeds)
    categories = {s.category for s in seeds}
    assert len(categories) >= 10
    assert {"commerce", "health", "travel", "finance", "logistics", "education", "government", "media", "hr"} <= categories
