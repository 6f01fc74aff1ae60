"""Mutation survivors (round 35) of draftsmith.components.targets: the file a refusal names is cut to at most 300
characters (a path of 300 kept whole), and a config whose name_or_path is no text names plain 'config.json'."""
from types import SimpleNamespace

from draftsmith.components.targets import config_path


def folder_of(length: int) -> str:
    """A folder whose config.json path is ``length`` characters."""
    return "/" + "d" * (length - len("/") - len("/config.json"))


# catches targets.py short_text(..., 300) -> 301 and -> 299
def test_the_named_file_is_cut_past_300_characters():
    assert config_path(SimpleNamespace(name_or_path=folder_of(300))) == folder_of(300) + "/config.json"
    cut = config_path(SimpleNamespace(name_or_path=folder_of(301)))
    assert len(cut) == 299 and "..." in cut and cut.endswith("/config.json")


# catches targets.py isinstance(folder, str) and folder -> or (a non-text name_or_path read as a folder)
def test_a_name_or_path_that_is_no_text_names_config_json():
    assert config_path(SimpleNamespace(name_or_path=["a", "b"])) == "config.json"
    assert config_path(SimpleNamespace(name_or_path="")) == "config.json"
    assert config_path(SimpleNamespace()) == "config.json"
