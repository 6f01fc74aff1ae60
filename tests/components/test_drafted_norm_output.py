"""Mutation survivors of components/eagle3_config.py drafted_norm_output (round 30): the fed-back norm is the
spec's feed_back: post_norm beside a head norm only; every other pair stays as the fusion says (convert's facts,
same_draft and train's export read it: a wrong answer writes norm_output true for a draft that feeds back pre-norm).
The convert tests caught these only through a full convert; this states the rule itself."""
import pytest

from draftsmith.components.eagle3_config import drafted_norm_output


@pytest.mark.parametrize("norm_output, feed_back, runs", [
    ("head", "post_norm", "feed_back"),   # the other spelling of a fed-back norm
    ("head", "pre_norm", "head"),          # catches 'and' -> 'or' and '==' -> '!=' on feed_back
    ("head", "", "head"),
    ("none", "post_norm", "none"),         # catches 'and' -> 'or' and '==' -> '!=' on norm_output
    ("feed_back", "post_norm", "feed_back"),
    (None, "post_norm", None),
])
def test_only_post_norm_beside_a_head_norm_is_the_fed_back_norm(norm_output, feed_back, runs):
    assert drafted_norm_output(norm_output, feed_back) == runs
