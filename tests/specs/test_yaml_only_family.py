"""A new family is a YAML file: a two-layer EAGLE-3 with per-aux norms before fc, no norm on the output, and its
own tensor naming (`draft.` prefix, `fusion_norms.N`), written as YAML in a temporary folder and assembled with no
Python added; it decodes losslessly and its fc norms are applied."""
import textwrap

import torch
from safetensors.torch import load_file, save_file

import draftsmith
from draftsmith.testing import write_eagle3, write_target

SPEC = textwrap.dedent("""
    name: my-two-layer-eagle3
    description: two-layer EAGLE-3 with one norm per aux state, draft.-prefixed names, logits from the raw output
    draft:
      num_layers: 2
      layer: {kind: llama}
      attention: {kind: gqa, rope: neox}
      norms: {input: all, final: true}
      fusion:
        kind: eagle3
        norm_before_residual: true
        fc_norm: true
        norm_before_fc: false
        norm_output: none                 # SpecForge norm_output=false: the head reads the un-normed output
        aux_layers: {ids: [1, 3, 6], at: output}
      feed_back: pre_norm
      vocab: {reduced: auto, d2t: offset}
      share: {embed: target, lm_head: draft}
    weights:
      rules:
        - {match: '^draft\\.fusion_norms\\.', replace: 'fc.aux_norm.'}
        - {match: '^draft\\.', replace: ''}
    decoding: {topk: 2, steps: 3, draft_tokens: 6}
""")


def test_a_new_family_written_as_yaml_only_assembles_and_decodes(tmp_path):
    target = write_target(tmp_path / "t", "llama", num_hidden_layers=8, seed=3)
    draft = write_eagle3(tmp_path / "d", target, layout="layers", layers=2, fc_norm=True, draft_vocab=40)
    tensors = load_file(str(draft / "model.safetensors"))
    renamed = {"draft." + n.replace("fc_norm.", "fusion_norms."): t for n, t in tensors.items()}
    save_file(renamed, str(draft / "model.safetensors"))
    (tmp_path / "my.yaml").write_text(SPEC)

    model = draftsmith.assemble(tmp_path / "my.yaml", target=target, draft=draft, dtype="float64")
    d = model.draft
    assert len(d.layers) == 2 and d.taps == (2, 4, 7)              # ids at output: input of id + 1
    assert d.layers[0].norm_before_residual and not d.head_norm and len(d.fc.aux_norm) == 3
    assert torch.equal(d.fc.aux_norm[1].weight.float(), tensors["fc_norm.1.weight"])
    base = model.generate_baseline([3, 1, 4, 1, 5], max_new_tokens=12, stop=[])
    assert model.generate([3, 1, 4, 1, 5], max_new_tokens=12, stop=[]).token_ids == base.token_ids

    # the per-aux norms are applied: fc sees cat(norm_i(chunk_i)), not the raw aux states
    aux = torch.randn(1, 2, 3 * 64, dtype=torch.float64)
    with torch.no_grad():
        got = d.fc.fuse(None, aux, True)
        normed = torch.cat([n(c) for n, c in zip(d.fc.aux_norm, aux.chunk(3, -1))], -1)
        torch.testing.assert_close(got, normed @ d.fc.weight.T, atol=1e-12, rtol=0)
        assert not torch.allclose(got, aux @ d.fc.weight.T)
        # norm_output: none -- the head reads the raw output
        out = torch.randn(1, 1, 64, dtype=torch.float64)
        z = d.logits(out, model.draft_head)
        kept = torch.isfinite(z[0, 0])
        torch.testing.assert_close(z[0, 0][kept], model.draft_head(out)[0, 0], atol=1e-12, rtol=0)
