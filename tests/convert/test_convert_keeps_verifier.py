"""`draftsmith convert` between two layouts of one speculators config style keeps what the source's config says of
itself (``speculators_config``: the verifier, the proposal methods), as train's export does for a --from-draft
source (convert.layouts.layout_config, shared); from any other style the result gets the style's template (a null
verifier), and a flat layout has none."""
import json

import pytest

from draftsmith.convert.run import convert
from draftsmith.testing import write_eagle1_speculators, write_eagle3
from test_convert import fake_target, files_of, same_bits

VERIFIER = {"name_or_path": "org/target-8b", "architectures": ["LlamaForCausalLM"]}


def with_verifier(src, tokens=3):
    cfg = json.loads((src / "config.json").read_text())
    cfg["speculators_config"]["verifier"] = dict(VERIFIER)
    cfg["speculators_config"]["proposal_methods"][0]["speculative_tokens"] = tokens
    (src / "config.json").write_text(json.dumps(cfg))
    return cfg["speculators_config"]


def config_of(folder):
    return json.loads((folder / "config.json").read_text())


@pytest.mark.parametrize("layers", [1, 2])
def test_an_eagle3_speculators_source_keeps_its_speculators_config(tmp_path, layers):
    src = write_eagle3(tmp_path / "src", fake_target(tmp_path / "t"), layout="layers", layers=layers,
                       config="speculators", draft_vocab=40, aux_ids=[1, 2, 3])
    was = with_verifier(src)
    written = convert(src, "speculators", tmp_path / "out")
    assert written["speculators_config"] == was == config_of(tmp_path / "out")["speculators_config"]
    assert same_bits(files_of(src), files_of(tmp_path / "out"))
    # through a flat layout the verifier is lost (no key holds it): back in speculators, the template's
    assert "speculators_config" not in convert(src, "layers", tmp_path / "flat")
    again = convert(tmp_path / "flat", "speculators", tmp_path / "again")
    assert again["speculators_config"]["verifier"] == {"name_or_path": None, "architectures": None}
    assert {k: v for k, v in again.items() if k != "speculators_config"} == \
        {k: v for k, v in written.items() if k != "speculators_config"}


def test_a_speculators_eagle1_source_keeps_its_speculators_config(tmp_path):
    src = write_eagle1_speculators(tmp_path / "src", fake_target(tmp_path / "t"), heads=False)
    was = with_verifier(src, tokens=4)
    written = convert(src, "eagle1-speculators", tmp_path / "out")
    assert written["speculators_config"] == was and written["speculators_model_type"] == "eagle"
    assert same_bits(files_of(src), files_of(tmp_path / "out"))


def test_a_flat_source_gets_the_styles_template(tmp_path):
    src = write_eagle3(tmp_path / "src", fake_target(tmp_path / "t"), draft_vocab=40)
    written = convert(src, "speculators", tmp_path / "out")
    assert written["speculators_config"]["verifier"] == {"name_or_path": None, "architectures": None}
    assert written["speculators_config"]["algorithm"] == "eagle3"
