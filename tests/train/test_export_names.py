"""The names a trained draft is written under (:func:`draftsmith.train.draft_io.checkpoint_names`): a rule's inverse
is followed where it renames a tensor in every layer that holds it (a YAML family's ``inverse:``), and not where it
would rename one layer of several (eagle3-llama's ``midlayer.`` -> ``layers.0.`` in a deeper draft)."""
from draftsmith.components.weights import RegexRule, RuleSet
from draftsmith.train.draft_io import checkpoint_names

MIDLAYER = RegexRule(match=r"^midlayer\.", replace="layers.0.")
BLOCK = RegexRule(match=r"^draft_block\.(\d+)\.attn\.", replace=r"layers.\1.self_attn.",
                  inverse=(r"^layers\.(\d+)\.self_attn\.", r"draft_block.\1.attn."))
LN_HIDDEN = RegexRule(match=r"^draft_block\.0\.ln_hidden\.", replace="layers.0.hidden_norm.")


def canonical(layers: int) -> list[str]:
    per_layer = ("self_attn.q_proj.weight", "mlp.up_proj.weight")
    return ["fc.weight", "layers.0.hidden_norm.weight"] + [f"layers.{i}.{s}" for i in range(layers) for s in per_layer]


def test_a_rule_inverse_that_renames_every_layer_is_followed():
    """A two-layer YAML family whose rule states ``inverse:``: both layers' attention is written under its names
    (the export wrote the canonical layers.N.* names, silently), and layer 0's own hidden_norm rule is followed."""
    got = checkpoint_names(RuleSet([BLOCK, LN_HIDDEN]), canonical(2))
    assert got["layers.0.self_attn.q_proj.weight"] == "draft_block.0.attn.q_proj.weight"
    assert got["layers.1.self_attn.q_proj.weight"] == "draft_block.1.attn.q_proj.weight"
    assert got["layers.0.hidden_norm.weight"] == "draft_block.0.ln_hidden.weight"
    assert got["layers.1.mlp.up_proj.weight"] == "layers.1.mlp.up_proj.weight"   # no rule: its own name
    assert got["fc.weight"] == "fc.weight"


def test_a_rule_that_would_rename_one_layer_of_several_is_not_used():
    """eagle3-llama's midlayer rule in a two-layer draft: every layer keeps layers.N.* (SpecForge's layout),
    hidden_norm too (layer 0 alone holds it, but its rule is the one that renames layer 0 alone)."""
    got = checkpoint_names(RuleSet([MIDLAYER]), canonical(2))
    assert got == {n: n for n in canonical(2)}


def test_a_one_layer_draft_follows_the_midlayer_rule():
    got = checkpoint_names(RuleSet([MIDLAYER]), canonical(1))
    assert got["layers.0.self_attn.q_proj.weight"] == "midlayer.self_attn.q_proj.weight"
    assert got["layers.0.hidden_norm.weight"] == "midlayer.hidden_norm.weight"
    assert got["fc.weight"] == "fc.weight"


SPEC = r"""name: blocks
extends: eagle3-llama
draft: {num_layers: 2}
weights:
  rules:
    - {match: '^draft_block\.(\d+)\.attn\.([qkvo])\.', replace: 'layers.\1.self_attn.\2_proj.',
       inverse: ['^layers\.(\d+)\.self_attn\.([qkvo])_proj\.', 'draft_block.\1.attn.\2.']}
    - {match: '^draft_block\.(\d+)\.ffn\.(gate|up|down)\.', replace: 'layers.\1.mlp.\2_proj.',
       inverse: ['^layers\.(\d+)\.mlp\.(gate|up|down)_proj\.', 'draft_block.\1.ffn.\2.']}
"""


def test_train_writes_a_two_layer_yaml_family_under_its_inverses_and_the_spec_loads_it(job, tiny, tmp_path):
    """`train --spec` with a YAML family of two layers whose rules state inverses: the draft is written in the
    family's names, and the same spec loads exactly what was trained."""
    import torch
    from safetensors.torch import load_file

    import draftsmith
    from draftsmith.train.pipeline import run

    (tmp_path / "blocks.yaml").write_text(SPEC)
    out = tmp_path / "out"
    run(job(out, spec=tmp_path / "blocks.yaml", max_windows=4, config={"steps": 1}))
    written = load_file(str(out / "model.safetensors"))
    assert {"draft_block.0.attn.q.weight", "draft_block.1.ffn.down.weight"} <= set(written), sorted(written)
    assert not any(n.startswith("layers.") and ("self_attn" in n or ".mlp." in n) for n in written), sorted(written)
    loaded = draftsmith.assemble(tmp_path / "blocks.yaml", target=tiny / "target", draft=out).draft.state_dict()
    for layer in (0, 1):
        assert torch.equal(loaded[f"layers.{layer}.self_attn.q_proj.weight"].to(torch.bfloat16),
                           written[f"draft_block.{layer}.attn.q.weight"])
        assert torch.equal(loaded[f"layers.{layer}.mlp.down_proj.weight"].to(torch.bfloat16),
                           written[f"draft_block.{layer}.ffn.down.weight"])
