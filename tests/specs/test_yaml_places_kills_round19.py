"""Mutation survivors of draftsmith/yaml_places.py (round 19): a mapping with two '<<' keys (the loader refuses it,
but yaml_places maps any text it is given) keeps each merge under a path of its own, and the later '<<' is searched
before the earlier one, as the comment at yaml_places.py:134 says."""
from draftsmith.yaml_places import yaml_places

TWO_MERGES = ("a: &a {x: 1, z: 0}\n"   # 1
              "b: &b {x: 2, y: 3}\n"   # 2
              "m:\n"                   # 3
              "  <<: *a\n"             # 4
              "  <<: *b\n")            # 5


def test_two_merge_keys_each_keep_their_own_alias_and_the_later_is_searched_first():
    # catches yaml_places.py:134 `merge_at = 0` -> 1 (the earlier '<<' searched first: m.x placed at line 4 via *a)
    # and :136 `parent.merges += 1` -> `+= 0` (both '<<' keys share one path: the first '<<' alias is overwritten
    # by the second, so m.z, only in *a, loses its place and note, and m.y is put at the first '<<')
    places = yaml_places(TWO_MERGES)
    assert places.place("m.x") == ((5, 3), "via alias *b defined at line 2")
    assert places.place("m.y") == ((5, 3), "via alias *b defined at line 2")
    assert places.place("m.z") == ((4, 3), "via alias *a defined at line 1")
    assert len(places.merges["m"]) == 2 and len(set(places.merges["m"])) == 2
