"""`draftsmith convert` to a flat (Hugging Face) config never invents ``norm_output: true``: SpecForge reads true as
"norm before the head", but vLLM's llama_eagle3 and TensorRT-LLM read it as EAGLE 3.1's post-norm feedback, so a
plain EAGLE-3 draft would run there with the wrong feedback. An absent key means "head" to all of them; a key the
source config itself wrote is kept as written."""
import json

import pytest

import draftsmith
from draftsmith.convert.inspect import inspect_checkpoint
from draftsmith.convert.run import convert
from draftsmith.testing import write_eagle3, write_target


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    return write_target(tmp_path_factory.mktemp("target"))


def config_of(folder):
    return json.loads((folder / "config.json").read_text())


def run(spec, target, draft):
    model = draftsmith.assemble(spec, target=target, draft=draft)
    out = model.generate(list(range(3, 20)), max_new_tokens=12)
    return out.token_ids, out.stats.accepted_per_position


@pytest.mark.parametrize("to", ["midlayer", "layers"])
def test_a_plain_eagle3_draft_is_written_without_norm_output(target, tmp_path, to):
    src = write_eagle3(tmp_path / "src", target)
    assert "norm_output" not in config_of(src)
    written = convert(src, to, tmp_path / "out")
    assert "norm_output" not in config_of(tmp_path / "out") and "norm_output" not in written
    before, after = inspect_checkpoint(src), inspect_checkpoint(tmp_path / "out")
    assert after.spec["draft"]["fusion"] == before.spec["draft"]["fusion"]
    assert after.spec["draft"]["fusion"]["norm_output"] == "head"
    spec = before.match.spec
    assert run(spec, target, src) == run(spec, target, tmp_path / "out")
    assert run(after.match.spec, target, tmp_path / "out") == run(spec, target, src)


def test_a_speculators_head_draft_becomes_a_flat_config_without_the_key(target, tmp_path):
    src = write_eagle3(tmp_path / "s", target, config="speculators", layout="layers")
    assert config_of(src)["norm_output"] is False    # speculators' false: norm before the head
    convert(src, "layers", tmp_path / "out")
    assert "norm_output" not in config_of(tmp_path / "out")
    assert inspect_checkpoint(tmp_path / "out").spec["draft"]["fusion"]["norm_output"] == "head"


@pytest.mark.parametrize(("said", "to"), [(True, "midlayer"), (True, "layers"), (False, "midlayer")])
def test_a_key_the_source_wrote_is_kept_as_written(target, tmp_path, said, to):
    src = write_eagle3(tmp_path / "src", target, flags={"norm_output": said})
    convert(src, to, tmp_path / "out")
    assert config_of(tmp_path / "out")["norm_output"] is said
    convert(tmp_path / "out", "midlayer", tmp_path / "back")
    assert config_of(tmp_path / "back")["norm_output"] is said    # and back again, still as the source wrote it
