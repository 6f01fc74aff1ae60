"""Mutation survivors of assembler/build.py, load.py, parts.py, models.py and decoding/modes.py, model.py: each
test names the mutants it catches (file:line before -> after)."""
import dataclasses
import logging
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import yaml
from torch import nn
from transformers import LlamaConfig

import draftsmith
from draftsmith.assembler.build import build_draft, build_target, held_layers, hidden_norm_slot, norm_problems
from draftsmith.assembler.checkpoint import save_safetensors
from draftsmith.assembler.config import draft_hf_config
from draftsmith.assembler.load import fill, materialize, plan_module
from draftsmith.assembler.models import DraftModel
from draftsmith.assembler.parts import LayerRecipe
from draftsmith.components import backends
from draftsmith.components.weights import RuleSet
from draftsmith.decoding.model import SpeculativeModel
from draftsmith.decoding.modes import choose_mode
from draftsmith.errors import CheckpointError
from draftsmith.specs.loader import parse_spec
from draftsmith.testing import write_eagle1, write_target

BUILTIN = Path(draftsmith.__file__).parent / "specs" / "builtin"
RAW = {"hidden_size": 32, "intermediate_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
       "vocab_size": 96, "num_hidden_layers": 1}


def spec(name: str = "eagle3-llama", **draft):
    """A built-in spec with draft fields replaced (``fusion__norm_output="none"``: draft.fusion.norm_output)."""
    data = yaml.safe_load((BUILTIN / f"{name}.yaml").read_text())
    for key, value in draft.items():
        *parents, last = key.split("__")
        section = data["draft"]
        for p in parents:
            section = section[p]
        section[last] = value
    return parse_spec(data)


def two_layer_draft(s):
    """An EAGLE-3-shaped draft of two layers on the meta device, built from spec ``s``."""
    target = LlamaConfig(hidden_size=32, num_attention_heads=4, num_hidden_layers=8, vocab_size=96)
    names = ["fc.weight", "layers.0.hidden_norm.weight", "layers.1.mlp.up_proj.weight"]
    return build_draft(s, draftsmith.default_registry(), draft_raw=RAW, draft_cfg=draft_hf_config(RAW),
                       target_cfg=target, canonical_names=names, backend=backends.sdpa)


class _Without:
    """A config that lacks one attribute (a plugin target's config without the field)."""

    def __init__(self, cfg, name):
        self._cfg, self._name = cfg, name

    def __getattr__(self, key):
        if key == self._name:
            raise AttributeError(key)
        return getattr(self._cfg, key)


# ---- build.py ----------------------------------------------------------------------------------------------------

def test_a_draft_of_64_layers_is_taken_and_a_layer_64_is_refused():
    # catches build.py:68 digits > len(...) -> >= (layers.10 refused), `or` -> `and` (layers.64 passed: 2 digits),
    # int(run) >= DRAFT_LAYERS -> > (layers.64 passed)
    s = draftsmith.load_spec("eagle3-llama")
    assert held_layers(s, ["layers.0.x", "layers.10.x"]) == 11
    assert held_layers(s, ["layers.63.x"]) == 64
    with pytest.raises(draftsmith.SpecError, match=r"of layer 64; a draft has at most 64 layers"):
        held_layers(s, ["layers.64.x"])


def test_a_layer_number_of_20_digits_is_written_out_and_of_21_is_counted():
    # catches build.py:69 digits <= 20 -> < 20, 20 -> 21 / 19
    s = draftsmith.load_spec("eagle3-llama")
    for run, shown in [("1" * 20, "1" * 20), ("1" * 21, "<a number of 21 digits>")]:
        with pytest.raises(draftsmith.SpecError) as e:
            held_layers(s, [f"layers.{run}.x"])
        assert f"of layer {shown}; a draft has at most" in str(e.value)


def test_a_fusion_that_does_not_say_has_no_hidden_norm_slot():
    # catches build.py:108 getattr(fc, 'has_hidden_norm', False) -> True (a plugin fusion without the attribute)
    assert hidden_norm_slot(spec(), object()) is False


def test_a_hidden_norm_asked_of_a_fusion_without_the_slot_is_reported_as_found_true():
    # catches draft_rules.py Problem(..., found=True) -> found=False (a plugin fusion without the attribute)
    [problem] = norm_problems(spec(norms__hidden=True), SimpleNamespace(norm_output="head"))
    assert problem.path == "draft.norms.hidden" and problem.found is True and problem.render().startswith(
        "  draft.norms.hidden: true: ") and "(found" not in problem.render()   # the message says it: not twice


def test_the_norm_problems_a_built_fusion_decides_are_reported_together():
    fc = SimpleNamespace(norm_output="feed_back")   # a config's norm_output read as feed_back, no hidden-norm slot
    problems = norm_problems(spec(norms__hidden=True, norms__final=False), fc)
    assert [p.path for p in problems] == ["draft.norms.hidden", "draft.norms.final"]
    assert "but the draft config's norm_output, read as feed_back feeds" in problems[1].message
    assert norm_problems(spec(norms__final=False), SimpleNamespace(norm_output="head")) == []


def test_a_target_config_without_tie_word_embeddings_is_untied():
    # catches build.py:37 getattr(cfg, 'tie_word_embeddings', False) -> True (transformers reads absent as False),
    # parts.py:42 Stacker.layer(norm_before_residual=False) -> True (a target layer's flag; own_input ignores it)
    cfg = LlamaConfig(hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2,
                      num_hidden_layers=1, vocab_size=96, tie_word_embeddings=True)
    registry = draftsmith.default_registry()
    assert build_target(cfg, registry, backends.sdpa).tie
    model = build_target(_Without(cfg, "tie_word_embeddings"), registry, backends.sdpa)
    assert not model.tie and model.lm_head.weight is not model.model.embed_tokens.weight
    assert not any(layer.norm_before_residual for layer in model.model.layers)  # parts.py:42, below


def test_the_fusions_norm_output_and_norm_before_residual_reach_the_draft():
    # catches build.py:145 head_norm=fc.norm_output != 'none' -> ==, :142 first and fc.norm_before_residual -> or
    # (layer 0 took the residual after hidden_norm with the flag false; layer 1 got the flag)
    plain = two_layer_draft(spec())
    assert plain.head_norm is True and [layer.norm_before_residual for layer in plain.layers] == [False, False]
    flipped = two_layer_draft(spec(fusion__norm_output="none", fusion__norm_before_residual=True))
    assert flipped.head_norm is False and [layer.norm_before_residual for layer in flipped.layers] == [True, False]


@pytest.mark.parametrize("how, normed", [("all", [True, True]), ("not_first", [False, True]), ("none", [False, False])])
def test_norms_input_fills_the_input_norm_slots_it_names(how, normed):
    # catches build.py:140 d.norms.input == 'not_first' -> != (input: none normed every layer after the first)
    model = two_layer_draft(spec(norms__input=how))
    assert [not isinstance(layer.input_layernorm, nn.Identity) for layer in model.layers] == normed


# ---- load.py -----------------------------------------------------------------------------------------------------

def test_a_nan_in_a_checkpoint_is_refused_when_filled_and_the_plan_is_frozen(tmp_path):
    # catches load.py:41 read_tensors(..., finite=True) -> False, :20 @dataclass(frozen=True) -> frozen=False
    save_safetensors({"weight": torch.tensor([[1.0, float("nan")]]), "bias": torch.zeros(1)}, tmp_path)
    planned = plan_module(nn.Linear(2, 1, device="meta"), tmp_path, RuleSet(), spec="t")
    with pytest.raises(dataclasses.FrozenInstanceError):
        planned.module = nn.Linear(2, 1)
    with pytest.raises(CheckpointError, match=r"NaN or inf values in 'weight' \(1 of 2\)"):
        planned = plan_module(nn.Linear(2, 1, device="meta"), tmp_path, RuleSet(), spec="t")
        fill(planned, dtype=torch.float32, device="cpu")


def test_materialize_names_the_first_8_tensors_left_on_meta():
    # catches load.py:64 left[:8] -> left[:9] / left[:7]
    module = nn.Sequential(*[nn.Linear(1, 1, bias=False, device="meta") for _ in range(10)])
    with pytest.raises(RuntimeError) as e:
        materialize(module, "cpu")
    assert str(e.value) == f"parameters left uninitialised after loading: {[f'{i}.weight' for i in range(8)]}"


# ---- parts.py ----------------------------------------------------------------------------------------------------

def test_a_layer_recipe_is_frozen():
    # catches parts.py:18 @dataclass(frozen=True) -> frozen=False
    with pytest.raises(dataclasses.FrozenInstanceError):
        LayerRecipe().norm = ("rms", {})


# ---- models.py ---------------------------------------------------------------------------------------------------

class _SumFusion(nn.Module):
    """A fusion that adds the embedding and the hidden state (what dtype it is handed shows in its output)."""

    def fuse(self, emb, hidden, from_target):
        return emb + hidden


class _Passes(nn.Module):
    """A head that returns what it reads, with a ``weight`` of the given dtype (or none)."""

    def __init__(self, dtype=None):
        super().__init__()
        if dtype is not None:
            self.weight = nn.Parameter(torch.zeros(2, 2, dtype=dtype), requires_grad=False)

    def forward(self, x):
        return x


def _bare_draft(**kw):
    return DraftModel(_SumFusion(), [], None, lm_head=None, draft_vocab=None, target_vocab=4, feed_post_norm=False,
                      **kw)


def test_a_draft_norms_before_its_head_unless_told_and_casts_to_its_compute_dtype():
    # catches models.py:86 DraftModel(head_norm=True) -> False, :109 compute_dtype is not None -> is None (what the
    # target hands over was not cast to a draft of another dtype)
    assert _bare_draft().head_norm is True and _bare_draft(head_norm=False).head_norm is False
    draft = _bare_draft()
    ids, hidden, pos = torch.tensor([[1, 2]]), torch.ones(1, 2, 3), torch.tensor([[0, 1]])
    embed = nn.Embedding(4, 3)
    assert draft(ids, hidden, pos, embed=embed, from_target=True)[0].dtype == torch.float32
    draft.compute_dtype = torch.float64
    out, feed = draft(ids, hidden, pos, embed=embed, from_target=True)
    assert out.dtype == feed.dtype == torch.float64


@pytest.mark.parametrize("weight, read", [(None, torch.float32), (torch.float32, torch.float32),
                                          (torch.float64, torch.float64), (torch.bfloat16, torch.bfloat16),
                                          (torch.float16, torch.float16), (torch.float8_e4m3fn, torch.float32),
                                          (torch.int8, torch.float32)])
def test_a_head_reads_its_weights_dtype_unless_it_has_none_or_one_byte_weights(weight, read):
    # catches models.py:130 (a shared target head of another dtype; an FP8 head dequantizes float input itself):
    # `or` -> `and`, w is None -> is not None, w.dtype == x.dtype -> !=, w.itemsize == 1 -> != 1 / == 2 / == 0
    x = torch.ones(1, 2, 2)
    assert _bare_draft().head_of(x, _Passes(weight)).dtype == read


# ---- decoding/modes.py -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode, topk, logged", [("auto", 2, True), ("auto", 1, False), ("v1", 4, False)])
def test_only_auto_falling_back_from_a_tree_logs_why(caplog, mode, topk, logged):
    # catches modes.py:34 mode == 'auto' and topk > 1: `and` -> `or`, > -> >=, 1 -> 2 / 0 (a chain asked for, by
    # topk 1 or by mode v1, is no fallback)
    with caplog.at_level(logging.INFO, logger="draftsmith"):
        assert choose_mode(mode, topk, 3, 4, 2, False).mode == "v1"
    assert ("draftsmith: " in caplog.text) == logged


# ---- decoding/model.py -------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A one-layer Llama target with the byte tokenizer and its EAGLE-1 draft, assembled."""
    root = tmp_path_factory.mktemp("tiny")
    write_target(root / "t", "llama", num_hidden_layers=1, hidden_size=32, intermediate_size=64, tokenizer=True)
    write_eagle1(root / "d", root / "t")
    return draftsmith.assemble("eagle1-llama", target=root / "t", draft=root / "d")


def test_generate_and_the_baseline_make_64_tokens_unless_told(tiny):
    # catches model.py:42 generate(max_new_tokens=64) -> 65 / 63, :75 generate_baseline(max_new_tokens=64) -> 65 / 63
    assert len(tiny.generate([104, 105], stop=[]).token_ids) == 64
    assert len(tiny.generate_baseline([104, 105], stop=[]).token_ids) == 64


def test_sampling_cuts_no_tokens_by_rank_unless_told(tiny):
    # catches model.py:43 generate(top_k=0) -> 1, :76 generate_baseline(top_k=0) -> 1 (top_k=1 samples greedily)
    for call in (tiny.generate, tiny.generate_baseline):
        drawn = call([104, 105], 8, 50.0, seed=3, stop=[]).token_ids
        assert drawn == call([104, 105], 8, 50.0, seed=3, top_k=0, stop=[]).token_ids
        assert drawn != call([104, 105], 8, 50.0, seed=3, top_k=1, stop=[]).token_ids


def test_a_model_is_not_recurrent_unless_told_and_hides_its_pools_and_lock(tiny):
    # catches model.py:32 recurrent=False -> True (a tree plan fell back to a chain), :36 and :39 field(repr=False)
    # -> True and field(compare=False) -> True for _runners_cache and _lock
    made = SpeculativeModel(tiny.target, tiny.draft, tiny.spec, tiny.tokenizer, tiny.stop_ids)
    assert made.recurrent is False and made.plan(topk=4).mode == "v2"
    tiny.generate_baseline([1], 2, stop=[])   # the cache holds a pair of runners
    assert tiny._runners_cache and "_runners_cache" not in repr(tiny) and "_lock" not in repr(tiny)
    assert tiny == dataclasses.replace(tiny)   # its own (empty) cache and lock, compared equal


def test_output_text_leaves_out_special_tokens(tiny):
    # catches model.py:140 decode(ids, skip_special_tokens=True) -> False ("hi</s>")
    hi = tiny.tokenizer.encode("hi", add_special_tokens=False)
    assert tiny._decode([*hi, tiny.tokenizer.eos_token_id]) == "hi"


def test_tap_ids_out_of_range_stop_a_build_unless_the_caller_defers_them():
    """A fusion's problem in values no shape depends on (EAGLE-3 tap ids past the target) builds with stand-in taps
    only for a caller that checks the tensors and says both (defer=True, assemble's plan); any other caller gets the
    SpecError, never a draft of stand-in taps."""
    from draftsmith.errors import SpecError

    s = spec("eagle3-llama", fusion__aux_layers={"at": "input", "ids": [1, 4, 50]})
    with pytest.raises(SpecError, match=r"tap layers \[50\]"):
        two_layer_draft(s)
    target = LlamaConfig(hidden_size=32, num_attention_heads=4, num_hidden_layers=8, vocab_size=96)
    names = ["fc.weight", "layers.0.hidden_norm.weight", "layers.1.mlp.up_proj.weight"]
    model = build_draft(s, draftsmith.default_registry(), draft_raw=RAW, draft_cfg=draft_hf_config(RAW),
                        target_cfg=target, canonical_names=names, backend=backends.sdpa, defer=True)
    assert [p.path for p in model.deferred_problems] == ["draft.fusion.aux_layers.ids"]
    assert model.fc.taps == (0, 1, 2)   # stand-ins of the same count: the same shapes


def test_tap_problems_set_aside_are_said_with_a_layer_count_auto_cannot_find():
    """The tap ids' problem set aside was dropped when the build failed after the fusion (num_layers auto finding no
    'layers.N.' name): both are said, in one SpecError."""
    from draftsmith.errors import SpecError

    s = spec("eagle3-llama", fusion__aux_layers={"at": "input", "ids": [1, 4, 50]}, num_layers="auto")
    target = LlamaConfig(hidden_size=32, num_attention_heads=4, num_hidden_layers=8, vocab_size=96)
    for defer in (True, False):
        with pytest.raises(SpecError) as info:
            build_draft(s, draftsmith.default_registry(), draft_raw=RAW, draft_cfg=draft_hf_config(RAW),
                        target_cfg=target, canonical_names=["fc.weight"], backend=backends.sdpa, defer=defer)
        assert [p.path for p in info.value.problems] == ["draft.fusion.aux_layers.ids", "draft.num_layers"], info.value
