"""Reader-visible text says only what is true here: no GPU profiles that are not committed, no
sequences in memory called users."""
import pathlib
import re

import pytest

from servelib.measure import load_profiles

ROOT = pathlib.Path(__file__).resolve().parent.parent
TEXT = sorted([*ROOT.glob("notebooks/*.py"), *ROOT.glob("book/*.md"), *ROOT.glob("plans/*.toml"),
               ROOT / "servelib" / "audit" / "examples.py"])


@pytest.mark.parametrize("path", TEXT, ids=lambda p: p.name)
def test_no_gpu_measurements_claimed_unless_committed(path):
    # The chapters once said that profiles measured on GPUs were committed with the book
    # while book/data held one CPU profile. Published GPU figures are labelled "published".
    has_gpu_profile = any(p["device"]["kind"] != "cpu" for p in load_profiles(ROOT / "book" / "data"))
    if has_gpu_profile:
        return
    text = path.read_text().lower()
    for claim in ("measured on real gpus", "made on gpus", "committed gpu profiles", "gpu profiles committed"):
        assert claim not in text, f"{path.name} claims {claim!r}, but book/data holds no GPU profile"


@pytest.mark.parametrize("path", TEXT, ids=lambda p: p.name)
def test_sequences_in_memory_are_not_called_users(path):
    # A count of resident sequences (concurrency) is not a count of users: many users idle
    # between turns, and one user may hold several sequences.
    for n, line in enumerate(path.read_text().splitlines(), 1):
        assert not re.search(r"(\d|\}|\bconcurrent)\s*users\b", line), f"{path.name}:{n}: {line.strip()}"
        assert "per user tokens/s" not in line, f"{path.name}:{n}: {line.strip()}"
