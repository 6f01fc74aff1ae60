"""A plugin's module that returns the wrong width or dtype is named where it happens (the kinds' ``output`` watch and
the draft model's fusion check), never later as draftsmith's internal error: an attention returning the wrong width,
a norm computing in float32 that never casts back under a bfloat16 run, a fusion whose fuse returns the wrong
width; an attention without ``cache_layout()`` is refused when built (each found by a dogfooding helper)."""
import pytest
import torch
import yaml

import draftsmith
from draftsmith.components.fusion import Eagle3Params, eagle3
from draftsmith.components.gqa import GQAParams, gqa
from draftsmith.components.attention import GQAttention
from draftsmith.components.norms import RMSNorm
from draftsmith.hooks import Component
from draftsmith.registry import ComponentFailed

from test_plugin_mistakes import OffsetParams, pair, spec_file  # noqa: F401  (pair: the module's fixture)
from test_plugins import Plugin, fresh


def assemble_part(tmp_path, pair, kind, factory, params, dtype="float32"):  # noqa: F811
    """The eagle3-llama draft with its ``kind`` component the plugin 'plug''s ``factory``."""
    reg = fresh(("plug", Plugin([Component(kind, "mine", factory, params)])))
    path = spec_file(tmp_path, {"kind": "rms"})
    data = yaml.safe_load(path.read_text())
    slot = data["draft"][kind]
    data["draft"][kind] = {**slot, "kind": "mine"} if isinstance(slot, dict) else {"kind": "mine"}   # its params kept
    path.write_text(yaml.safe_dump(data))
    return draftsmith.assemble(draftsmith.load_spec(path, reg), target=pair[0], draft=pair[1], registry=reg,
                               dtype=dtype)


def decode(model):
    return model.generate([1, 2, 3], max_new_tokens=3, stop=[]).token_ids


class Float32Out(RMSNorm):
    add_forward = None   # every call goes through forward

    def forward(self, x):
        x = x.float()   # computes in float32 and never casts back
        # data-dependent (.item()): the build's meta probe cannot run it (which refuses a plain one, test_plugin_probes)
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight.float() * float(
            x.abs().max().item() >= 0)


def test_a_norm_that_returns_float32_in_a_bfloat16_run_is_named(tmp_path, pair):  # noqa: F811
    def factory(params, *, dim, eps):
        return Float32Out(dim, eps)

    assert decode(assemble_part(tmp_path, pair, "norm", factory, OffsetParams))   # float32: it serves
    model = assemble_part(tmp_path, pair, "norm", factory, OffsetParams, dtype="bfloat16")
    with pytest.raises(ComponentFailed, match=r"^norm 'mine' \(plugin 'plug'\): its forward mapped an input of "
                                              r"\[1, \d+, 16\] bfloat16 to \[1, \d+, 16\] float32; it must return "
                                              r"\[1, \d+, 16\] in its input's dtype"):
        decode(model)


class Halved(GQAttention):
    def forward(self, x, pos, kv=None):
        out = super().forward(x, pos, kv)
        return out[..., : out.shape[-1] // 2]


def halved(params, **kw):
    made = gqa(params, **kw)
    made.__class__ = Halved
    return made


def test_an_attention_of_the_wrong_width_is_named_at_its_forward(tmp_path, pair):  # noqa: F811
    model = assemble_part(tmp_path, pair, "attention", halved, GQAParams)
    with pytest.raises(ComponentFailed, match=r"^attention 'mine' \(plugin 'plug'\): its forward mapped an input of "
                                              r"\[1, \d+, 32\] float32 to \[1, \d+, 8\] float32; it must return "
                                              r"\[1, \d+, 16\] in its input's dtype"):
        decode(model)


def test_a_well_made_plugin_attention_decodes_as_the_builtin(tmp_path, pair):  # noqa: F811
    model = assemble_part(tmp_path, pair, "attention", lambda params, **kw: gqa(params, **kw), GQAParams)
    assert decode(model) == model.generate_baseline([1, 2, 3], max_new_tokens=3, stop=[]).token_ids


class NoCache(torch.nn.Module):
    def forward(self, x, pos, kv=None):
        return x


def test_an_attention_without_cache_layout_is_refused_when_built(tmp_path, pair):  # noqa: F811
    with pytest.raises(ComponentFailed, match=r"^attention 'mine' \(plugin 'plug'\): its factory returned NoCache\(\) "
                                              r"\(it has no cache_layout\)"):
        assemble_part(tmp_path, pair, "attention", lambda params, **kw: NoCache(), GQAParams)


def test_a_fusion_whose_fuse_returns_another_width_is_named(tmp_path, pair):  # noqa: F811
    def factory(params, **kw):
        fusion = eagle3(params, **kw)
        fusion.fuse = lambda emb, hidden, from_target: torch.cat((emb, emb), -1)
        return fusion

    model = assemble_part(tmp_path, pair, "fusion", factory, Eagle3Params)
    with pytest.raises(ComponentFailed, match=r"^the draft's fusion \(draftsmith.components.fusion.Eagle3Fusion\): "
                                              r"its fuse\(emb \[1, \d+, 16\], ...\) returned \[1, \d+, 32\] float32; "
                                              r"fuse returns \[B, T, hidden\] in emb's dtype \(float32\)"):
        decode(model)


def test_a_plugin_class_fusion_that_misfits_is_named_by_its_component(tmp_path, pair):  # noqa: F811
    """A fusion of the plugin's own class is named as the component and plugin that made it (was its class path:
    a plugin-authoring helper); draftsmith's own class keeps its path (above)."""
    def factory(params, **kw):
        inner = eagle3(params, **kw)

        class Own(type(inner)):   # the plugin's own class (its module is not draftsmith's)
            def fuse(self, emb, hidden, from_target):
                return torch.cat((emb, emb), -1)
        inner.__class__ = Own
        return inner

    model = assemble_part(tmp_path, pair, "fusion", factory, Eagle3Params)
    with pytest.raises(ComponentFailed, match=r"^fusion 'mine' \(plugin 'plug'\): its fuse\(emb \[1, \d+, 16\], "
                                              r"...\) returned \[1, \d+, 32\] float32"):
        decode(model)
