"""A draft config that states no rms_norm_eps but holds a norm epsilon under another model's name (``norm_eps``,
``layer_norm_epsilon``) gets the key named on the load's default line (h81: only 'rms_norm_eps not stated: 1e-06
taken' was said, and the draft ran with the wrong epsilon)."""
import json
import logging

import draftsmith
from draftsmith.testing import write_eagle3, write_target


def _load_lines(tmp_path, caplog, **keys):
    write_target(tmp_path / "t", "llama", num_hidden_layers=4)
    write_eagle3(tmp_path / "d", tmp_path / "t", draft_vocab=64, aux_ids=[0, 1, 3])
    cfg = json.loads((tmp_path / "d" / "config.json").read_text())
    cfg.pop("rms_norm_eps", None)
    (tmp_path / "d" / "config.json").write_text(json.dumps(cfg | keys))
    with caplog.at_level(logging.INFO, logger="draftsmith"):
        draftsmith.assemble("eagle3-llama", target=tmp_path / "t", draft=tmp_path / "d")
    return [r.getMessage() for r in caplog.records if "rms_norm_eps not stated" in r.getMessage()]


def test_an_epsilon_under_another_name_is_named(tmp_path, caplog):
    (line,) = _load_lines(tmp_path, caplog, norm_eps=1e-5, dropout=0.1, max_norm_step=3)
    assert "the config has norm_eps: 1e-05, which nothing reads: if that is its norms' epsilon" in line, line
    assert "rename it rms_norm_eps" in line and "dropout" not in line and "max_norm_step" not in line, line


def test_a_config_without_one_says_the_default_alone(tmp_path, caplog):
    (line,) = _load_lines(tmp_path, caplog)
    assert line.endswith("rms_norm_eps not stated: 1e-06 taken (LlamaConfig's default)"), line
