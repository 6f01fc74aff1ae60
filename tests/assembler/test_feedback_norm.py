"""Post-norm feedback needs a final norm: ``draft.feed_back: post_norm`` or a fusion whose ``norm_output`` resolves
to ``feed_back`` (from the spec or, in its own meaning, from the draft config) feeds back the final norm's output.
With ``norms.final: false`` that silently became the pre-norm state; it is refused before anything is read."""
import pytest
import yaml

import draftsmith
from draftsmith.specs.catalog import BUILTIN_DIR
from draftsmith.testing import write_eagle3, write_target

SMALL = dict(hidden_size=16, intermediate_size=32, num_attention_heads=2, num_key_value_heads=1, num_hidden_layers=4,
             vocab_size=32)


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    return write_target(tmp_path_factory.mktemp("fb") / "target", **SMALL)


def spec_file(folder, *, final=True, feed_back="pre_norm", norm_output="head"):
    spec = yaml.safe_load((BUILTIN_DIR / "eagle3-llama.yaml").read_text())
    spec["draft"]["norms"]["final"] = final
    spec["draft"]["feed_back"] = feed_back
    if norm_output is None:
        del spec["draft"]["fusion"]["norm_output"]
    else:
        spec["draft"]["fusion"]["norm_output"] = norm_output
    path = folder / f"spec-{final}-{feed_back}-{norm_output}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.mark.parametrize(("feed_back", "norm_output", "who"), [
    ("post_norm", "head", "draft.feed_back: post_norm"),
    ("pre_norm", "feed_back", "the spec's norm_output"),
    ("post_norm", "feed_back", "draft.feed_back: post_norm and the spec's norm_output"),
])
def test_post_norm_feedback_without_a_final_norm_is_refused_naming_who_asks(target, tmp_path, feed_back,
                                                                            norm_output, who):
    draft = write_eagle3(tmp_path / "draft", target, aux_ids=[0, 1, 2])
    with pytest.raises(draftsmith.SpecError) as err:
        draftsmith.assemble(spec_file(tmp_path, final=False, feed_back=feed_back, norm_output=norm_output),
                            target=target, draft=draft)
    text = str(err.value)
    assert "draft.norms.final" in text and who in text and "Set norms.final: true" in text


def test_an_eagle31_config_asking_feed_back_refuses_a_spec_without_a_final_norm(target, tmp_path):
    # a speculators config's norm_output: true means feed_back (EAGLE 3.1); the spec leaves norm_output to it
    draft = write_eagle3(tmp_path / "draft", target, aux_ids=[0, 1, 2], config="speculators",
                         flags={"norm_output": True})
    with pytest.raises(draftsmith.SpecError, match="the draft config's norm_output, read as feed_back"):
        draftsmith.assemble(spec_file(tmp_path, final=False, norm_output=None), target=target, draft=draft)
    model = draftsmith.assemble(spec_file(tmp_path, final=True, norm_output=None), target=target, draft=draft)
    assert model.draft.feed_post_norm   # the config upgrades the spec's pre_norm, with the final norm there


@pytest.mark.parametrize("norm_output", ["head", "none"])
def test_pre_norm_feedback_without_a_final_norm_still_builds_and_decodes(target, tmp_path, norm_output):
    # EAGLE-1's shape: no final norm (its slot an identity), pre-norm feedback; the checkpoint holds no norm.weight
    from safetensors.torch import load_file, save_file

    draft = write_eagle3(tmp_path / "draft", target, aux_ids=[0, 1, 2])
    (file,) = draft.glob("*.safetensors")
    save_file({k: v for k, v in load_file(file).items() if k != "norm.weight"}, file, metadata={"format": "pt"})
    model = draftsmith.assemble(spec_file(tmp_path, final=False, norm_output=norm_output), target=target,
                                draft=draft)
    assert not model.draft.feed_post_norm
    prompts = [[3, 4, 5], [7, 1]]
    assert ([o.token_ids for o in model.generate(prompts, max_new_tokens=8)] ==
            [o.token_ids for o in model.generate_baseline(prompts, max_new_tokens=8)])
