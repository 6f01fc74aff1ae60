"""Mutation survivors of components/mtp.py (scripts/mutate.py --fork over test_blocks_kills, assembler/test_mla_mtp,
test_load_notes, test_builtin_specs_decode, test_components, registry/test_component_holds, train/test_fresh_specs:
24 of 30 killed; 29 of 30 with these tests): the count of unread MTP layers the warning states, no warning for a
config that declares no MTP layer count, and the residual flag an MTP draft's first layer is built with.

Equivalent, argued rather than tested:

- mtp.py:68 ``... or 1`` -> ``or 0``: n is read only by ``n > 1`` (and the warning that condition guards); a config
  that declares no count gets n = 1 or n = 0, and neither warns, so the factory's result and its log are the same.
"""
import logging

import pytest

import draftsmith
from draftsmith.components.mtp import MTPParams, mtp
from draftsmith.testing import write_target
from draftsmith.testing.mtp import write_mtp

H = 8


def _build(draft_config):
    return mtp(MTPParams(), hidden=H, target_width=H, draft_config=draft_config)


@pytest.mark.parametrize("key, n, other", [("num_nextn_predict_layers", 3, 2), ("num_mtp_layers", 2, 1)])
def test_the_warning_counts_the_mtp_layers_that_are_not_read(caplog, key, n, other):
    # catches mtp.py:73 n - 1 -> n + 1, n - 2, n - 0 (the warning miscounted the layers left unread)
    with caplog.at_level(logging.WARNING, logger="draftsmith"):
        _build({key: n, "num_hidden_layers": 61})
    assert f"declares {n} MTP layers" in caplog.text and "the draft is the first, model.layers.61," in caplog.text
    assert f"the tensors of the other {other} are not read" in caplog.text


@pytest.mark.parametrize("config", [{}, {"num_hidden_layers": 61}, {"num_nextn_predict_layers": None},
                                    {"num_nextn_predict_layers": 0}, {"num_nextn_predict_layers": 1}])
def test_a_config_declaring_at_most_one_mtp_layer_gets_no_warning(caplog, config):
    # catches mtp.py:68 `or 1` -> `or 2` (a config that states no MTP layer count was said to declare two)
    with caplog.at_level(logging.WARNING, logger="draftsmith"):
        _build(config)
    assert caplog.text == ""


def test_an_mtp_drafts_first_layer_keeps_the_raw_residual(tmp_path):
    # catches mtp.py:40 MTPFusion.norm_before_residual = False -> True: build.py hands it to the first layer's
    # factory (a plugin layer reads it, hooks/kinds.py), whereas MTP's block is an ordinary pre-norm layer whose
    # residual is its input (vLLM's and SGLang's DeepSeek MTP block, transformers' MtpLayer)
    write_target(tmp_path, "llama", num_hidden_layers=2, seed=4)
    write_mtp(tmp_path)
    model = draftsmith.assemble("deepseek-mtp", target=tmp_path, draft=tmp_path, dtype="float32")
    assert model.draft.fc.norm_before_residual is False
    assert [layer.norm_before_residual for layer in model.draft.layers] == [False]
