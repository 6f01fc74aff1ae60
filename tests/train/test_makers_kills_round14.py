"""The rows of the makers table are values: draft_io.MAKERS and COMMON are module-level tables every preflight and
init_draft reads, so a row is frozen (no caller can change what a later run is refused for) and hashes as a value,
even though a Need's ``allowed`` is a plain dict."""
import dataclasses

import pytest

from draftsmith.train.draft_io import COMMON, MAKERS
from draftsmith.train.makers import Maker, Need


def test_a_need_is_frozen_and_hashes_by_what_it_says_not_its_dict():
    # catches makers.py:21 @dataclass(frozen=True) -> @dataclass(frozen=False)
    # catches makers.py:27 field(hash=False) -> field(hash=True)
    need = COMMON[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        need.said = "anything"   # a caller cannot loosen the table every later run reads
    a = Need("norms", {"draft.norms.input": ("all",)})
    b = Need("norms", {"draft.norms.input": ("all",)})
    assert hash(a) == hash(b) and len({a, b}) == 1   # the dict is left out of the hash, not a TypeError


def test_a_maker_row_is_frozen_and_hashable_with_its_needs():
    # catches makers.py:55 @dataclass(frozen=True) -> @dataclass(frozen=False)
    row = MAKERS["eagle3"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.reduced_vocab = False   # would change what every later fresh EAGLE-3 start writes
    assert row in {row} and hash(row) == hash(Maker(row.name, row.makes, row.write, row.needs, row.reduced_vocab))
