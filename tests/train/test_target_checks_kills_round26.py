"""Mutation survivors of train/target_checks.py (round 26): the target folder a refused load plan names
(target_plan_problems) is said whole up to 300 characters and cut in the middle past that, as every other path in a
refusal. Expected texts are written here by hand."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from draftsmith.testing import write_target
from draftsmith.train.target_checks import target_plan_problems


def _path_of(base, n: int):
    """A path under ``base`` exactly ``n`` characters long (parts under the 255-character name limit)."""
    pad = n - len(str(base)) - 2
    path = base / ("a" * (pad // 2)) / ("b" * (pad - pad // 2))
    assert len(str(path)) == n
    return path


@pytest.mark.parametrize("n", [300, 301])
def test_a_target_that_does_not_load_is_named_whole_up_to_300_characters(tmp_path, n):
    """A target whose model.safetensors is cut short, in a folder of 300 characters: named whole; of 301: cut to
    148 + '...' + 148 (kills target_checks.py:74 short_text(folder, 300) -> 299 / 301)."""
    target = write_target(_path_of(tmp_path, n), "llama", seed=0)
    (target / "model.safetensors").write_bytes((target / "model.safetensors").read_bytes()[:-40])
    path = str(target)
    said = path if n == 300 else path[:148] + "..." + path[-148:]
    ((field, text),) = target_plan_problems(SimpleNamespace(target=target))
    assert field == "target"
    assert text.startswith(f"folder {said} does not load as a target: "), text
