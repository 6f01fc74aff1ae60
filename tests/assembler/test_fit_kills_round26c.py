"""Mutation round 26c on draftsmith.assembler.fit.closest_families: a built-in family whose rules place none of the
names but whose detection row's conditions partly hold (a config key it needs is there) scores above 0 and stays
an offer; only a family scoring 0 is dropped."""

import pytest

from draftsmith.assembler.fit import closest_families


@pytest.mark.parametrize("config, family", [({"dim": 16}, "eagle-mistral"),
                                            ({"speculators_config": {}}, "eagle3-speculators")])
def test_a_builtin_family_that_places_nothing_but_whose_config_key_is_there_is_offered(config, family):
    """No name is placed (share 0), but one of the row's config_any keys is there (1 of its 3 conditions): score
    (0 + 1/3) / 2, offered with every name unfit. Kills `spec in others and len(bad) == len(names)` ->
    `spec not in others ...`, which skipped every built-in family that places no name."""
    assert closest_families(config, ["foo.bar"]) == [(family, pytest.approx(1 / 6), ["foo.bar"])]


def test_with_no_condition_holding_and_no_name_placed_nothing_is_offered():
    """The same name with an empty config: every family scores 0, no offer at all."""
    assert closest_families({}, ["foo.bar"]) == []
