"""preflight (round 18 mutation run): an --out holding a trainer state to resume but no draft beside it is named
whole up to 300 characters, cut in the middle past that, as every other path in a refusal."""
import zipfile

import pytest

from draftsmith.train.checks import TrainError
from draftsmith.train.loop import STATE

from test_kills_round11 import path_of, shown


@pytest.mark.parametrize("n", [300, 301])
def test_an_out_with_a_trainer_state_but_no_draft_is_named_whole_up_to_300_characters(job, tmp_path, n):
    from draftsmith.train.preflight import NO_DRAFT, preflight

    out = path_of(tmp_path, n)
    out.mkdir(parents=True)
    with zipfile.ZipFile(out / STATE, "w") as z:   # an archive, as torch.save writes one: a resume, not a foreign file
        z.writestr("data.pkl", b"")
    with pytest.raises(TrainError) as e:
        preflight(job(out))
    said = (f"{shown(out)} holds a trainer state to resume, but {NO_DRAFT.removeprefix('holds ')}: put the draft's "
            "files back, or give a new or empty --out to start fresh")
    assert ("out", said) in e.value.problems, e.value.problems
