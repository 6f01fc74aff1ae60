"""Mutation round 31 (draftsmith/paths.py required_config): the folder a config is missing from is shown whole up to
300 characters and cut in the middle past them (a survivor: 299 and 301 read alike to every test)."""
from pathlib import Path

import pytest

from draftsmith.errors import CheckpointNotFound
from draftsmith.paths import required_config

NEEDS = ": no config.json or params.json (a checkpoint folder needs a config + weights)"


@pytest.mark.parametrize("last, shown", [
    (99, "/" + "/".join(["a" * 99] * 3)),                                  # 300 characters: whole
    (100, "/" + "a" * 99 + "/" + "a" * 47 + "..." + "a" * 47 + "/" + "a" * 100),   # 301: 148 + ... + 148
])
def test_the_folder_is_cut_past_300_characters(last, shown):
    folder = Path("/" + "/".join(["a" * 99, "a" * 99, "a" * last]))   # none of it exists
    with pytest.raises(CheckpointNotFound) as e:
        required_config(folder)
    assert str(e.value) == shown + NEEDS, str(e.value)
