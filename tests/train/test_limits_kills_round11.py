"""Mutation round 11c on limits.py: each bound the README states is enforced at its edge and named in the refusal
(a spec's values, description, size and weight-rule patterns; a checkpoint JSON's depth and size and its tensor
count; config sizes and decoding settings; a batch's prompts and max_new_tokens; a conversation's messages and
values; a probe file's size; train steps). The round's other train tests: test_kills_round11.py,
test_preflight_kills_round11.py."""
import pytest

from draftsmith.testing import LastMessageTokenizer
from draftsmith.train import TrainConfig

from test_kills_round11 import refusal   # the problems a constructor's refusal names


# limits.py: each bound the README states, enforced at its edge and named in the refusal


def eagle3_yaml(name: str = "edge") -> str:
    import draftsmith

    return open(draftsmith.load_spec("eagle3-llama").source).read().replace("name: eagle3-llama", f"name: {name}")


def spec_refusal(text: str, tmp_path) -> str:
    import draftsmith
    from draftsmith.errors import SpecError

    (tmp_path / "edge.yaml").write_text(text)
    with pytest.raises(SpecError) as e:
        draftsmith.load_spec(tmp_path / "edge.yaml")
    return " ".join(str(e.value).split())


def test_a_spec_of_more_than_20000_values_is_refused_naming_the_bound(tmp_path):
    text = eagle3_yaml() + "extra: [" + ",".join(["0"] * 21000) + "]\n"
    assert "more than 20000 values by line" in spec_refusal(text, tmp_path)


def test_a_description_of_2000_characters_is_taken_and_one_more_is_refused():
    import draftsmith
    import yaml
    from draftsmith.errors import SpecError

    raw = yaml.safe_load(eagle3_yaml())
    assert len(draftsmith.parse_spec({**raw, "description": "x" * 2000}).description) == 2000
    with pytest.raises(SpecError, match="at most 2000 characters"):
        draftsmith.parse_spec({**raw, "description": "x" * 2001})


def nested(levels: int) -> dict:
    value = 1
    for _ in range(levels):
        value = {"a": value}
    return value


def test_a_checkpoint_json_64_levels_deep_is_read_and_65_is_refused(tmp_path):
    import json

    from draftsmith.assembler.checkpoint import read_json
    from draftsmith.errors import CheckpointError

    (tmp_path / "config.json").write_text(json.dumps(nested(64)))
    assert read_json(tmp_path / "config.json") == nested(64)
    (tmp_path / "config.json").write_text(json.dumps(nested(65)))
    with pytest.raises(CheckpointError, match="nested deeper than 64 levels"):
        read_json(tmp_path / "config.json")


@pytest.mark.parametrize("key, most", [("num_hidden_layers", 1024), ("hidden_size", 1 << 20),
                                       ("vocab_size", 1 << 23)])
def test_a_config_size_at_its_bound_is_taken_and_one_more_is_refused_naming_it(key, most):
    from draftsmith.assembler.config_values import config_problems

    assert config_problems({key: most}) == []
    assert config_problems({key: most + 1}) == [f"{key} is {most + 1}; allowed 1..{most} (draftsmith/limits.py)"]


@pytest.mark.parametrize("decoding, key, most", [
    ({"steps": 64}, "steps", 64), ({"topk": 64, "steps": 64, "draft_tokens": 1024}, "draft_tokens", 1024),
    ({"page_size": 4096}, "page_size", 4096)])
def test_a_decoding_setting_at_its_bound_is_taken_and_one_more_is_refused_naming_it(decoding, key, most):
    import draftsmith
    import yaml
    from draftsmith.errors import SpecError

    raw = yaml.safe_load(eagle3_yaml())
    spec = draftsmith.parse_spec({**raw, "decoding": {**raw["decoding"], **decoding}})
    assert getattr(spec.decoding, key) == most
    with pytest.raises(SpecError) as e:
        draftsmith.parse_spec({**raw, "decoding": {**raw["decoding"], **decoding, key: most + 1}})
    assert " ".join(str(e.value).split()).endswith(f"decoding.{key}: {most + 1} is not allowed allowed: an integer "
                                                   f"<= {most}")


def test_a_batch_of_4096_prompts_is_taken_and_4097_are_refused_naming_the_bound():
    from draftsmith.decoding.prompts import encode_prompts

    problems = []
    ids, _ = encode_prompts([[1]] * 4096, tokenizer=None, vocab=10, context=None, problems=problems)
    assert len(ids) == 4096 and problems == []
    encode_prompts([[1]] * 4097, tokenizer=None, vocab=10, context=None, problems=problems)
    assert problems == ["prompt: a batch of 4097 prompts; at most 4096 in one call"]


def test_a_spec_file_of_64_kib_loads_and_one_byte_more_is_refused_naming_the_bound(tmp_path):
    import draftsmith

    text = eagle3_yaml() + "# padding\n"
    text += "#" * (64 * 1024 - len(text.encode()) - 1) + "\n"
    (tmp_path / "edge.yaml").write_text(text)
    assert (tmp_path / "edge.yaml").stat().st_size == 65536
    assert draftsmith.load_spec(tmp_path / "edge.yaml").name == "edge"
    said = spec_refusal(text + "\n", tmp_path)
    assert "the file is 65537 bytes; a spec is at most 65536 bytes (draftsmith/limits.py)" in said


def test_a_checkpoint_json_of_16_mib_is_read_and_one_byte_more_is_refused_naming_the_bound(tmp_path):
    from draftsmith.assembler.checkpoint import read_json
    from draftsmith.errors import CheckpointError

    head = b'{"a": "'
    (tmp_path / "config.json").write_bytes(head + b"x" * (16 * 1024 * 1024 - len(head) - 2) + b'"}')
    assert len(read_json(tmp_path / "config.json")["a"]) == 16 * 1024 * 1024 - 9
    with open(tmp_path / "config.json", "ab") as f:
        f.write(b" ")
    with pytest.raises(CheckpointError, match="16777217 bytes; a JSON file here is at most 16777216 bytes"):
        read_json(tmp_path / "config.json")


def test_a_weight_rule_pattern_of_1000_characters_is_taken_and_one_more_is_refused_naming_the_bound():
    from draftsmith.components.weights import pattern_problem

    assert pattern_problem("a" * 1000) is None
    assert pattern_problem("a" * 1001) == "a pattern of 1001 characters; at most 1000"


def test_max_new_tokens_of_2_20_is_taken_and_one_more_is_refused_naming_the_bound():
    from draftsmith.decoding.arguments import settings_problems

    assert settings_problems(1 << 20, 0, 1.0, 0, None, None, vocab=32) == []
    assert settings_problems((1 << 20) + 1, 0, 1.0, 0, None, None, vocab=32) == [
        "max_new_tokens is 1048577; an integer in 1..1048576 is expected"]


def conversation_problems(prompt) -> tuple[list, list[str]]:
    from draftsmith.decoding.prompts import encode_prompts

    said: list[str] = []
    ids, _ = encode_prompts(prompt, tokenizer=LastMessageTokenizer(), vocab=32, context=None, problems=said)
    return ids, said


def test_a_conversation_of_65536_messages_is_read_and_one_more_is_refused_by_its_count():
    one = {"role": "user", "content": "x"}
    _, said = conversation_problems([one] * 65536)      # read, then refused for the values they hold (5 each)
    assert len(said) == 1 and said[0].startswith("prompt: a conversation that holds more than 131072 values")
    _, said = conversation_problems([one] * 65537)
    assert said == ["prompt: a conversation of 65537 messages; at most 65536 are read (its tokens must also fit the "
                    "target's context once rendered)"]


def test_a_conversation_of_131072_values_is_read_and_one_more_is_refused():
    """The list, the message, its 3 keys, 2 strings and a list of n strings (1 + n) are 8 + n values."""
    talk = [{"role": "user", "content": "abc", "extra": ["v"] * (131072 - 8)}]
    assert conversation_problems(talk) == ([[1, 2, 3]], [])
    ids, said = conversation_problems([{**talk[0], "extra": ["v"] * (131072 - 7)}])
    assert ids == [] and len(said) == 1 and "holds more than 131072 values as its template writes them" in said[0]


def test_a_checkpoint_listing_2_20_tensors_is_taken_and_one_more_is_refused_naming_the_bound(tmp_path):
    """The count a header or index states is checked before a name is read (a header of 2^20 names is ~50 MB to
    write, so the check is called with the count alone)."""
    from draftsmith.assembler.weight_files import check_names
    from draftsmith.errors import CheckpointError

    check_names(tmp_path / "model.safetensors", [], 1 << 20)
    with pytest.raises(CheckpointError, match="lists 1048577 tensors; a checkpoint here holds at most 1048576 "):
        check_names(tmp_path / "model.safetensors", [], (1 << 20) + 1)


def test_a_probe_file_of_1_mib_is_read_and_one_byte_more_is_refused_naming_the_bound(tmp_path):
    from draftsmith.cli.doctor import _probe_file
    from draftsmith.errors import OptionError

    (tmp_path / "probe.txt").write_bytes(b"a" * (1 << 20))
    assert len(_probe_file(str(tmp_path / "probe.txt"))) == 1 << 20
    (tmp_path / "probe.txt").write_bytes(b"a" * ((1 << 20) + 1))
    with pytest.raises(OptionError, match="is 1048577 bytes; a probe file holds at most 1048576 "):
        _probe_file(str(tmp_path / "probe.txt"))


def test_steps_up_to_ten_million_are_taken_and_one_more_is_refused_naming_the_ceiling():
    assert TrainConfig(steps=10_000_000).steps == 10_000_000
    ((field, text),) = refusal(TrainConfig, steps=10_000_001)
    assert field == "steps" and text.startswith("10000001: allowed at most 10000000 (about twelve days")
