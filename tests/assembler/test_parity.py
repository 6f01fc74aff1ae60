"""Target parity: tiny random Hugging Face checkpoints loaded through draftsmith give transformers' own logits
(float32, atol 1e-4), over a whole sequence and through the paged KV pool (prefill, then one token at a time)."""

import json
from pathlib import Path

import pytest
import torch
from transformers import AutoConfig, AutoModelForCausalLM

from draftsmith.assembler.assemble import load_target
from draftsmith.assembler.build import build_target
from draftsmith.assembler.plan import expected_of
from draftsmith.components import backends
from draftsmith.components.targets import TARGETS
from draftsmith.decoding.batching import causal_batch, pad_tokens
from draftsmith.decoding.kvpool import PagedKVPool
from draftsmith.registry import default_registry
from draftsmith.registry.registry import UnknownComponent
from draftsmith.testing import write_target

ATOL = 1e-4
LLAMA3 = {"rope_type": "llama3", "rope_theta": 50000.0, "factor": 8.0, "low_freq_factor": 1.0,
          "high_freq_factor": 4.0, "original_max_position_embeddings": 16}


def t4_style(**rope):
    """A transformers-4 config.json: top-level rope_theta, rope_scaling (with the given keys), no rope_parameters."""
    def edit(cfg):
        cfg.pop("rope_parameters", None)
        cfg["rope_theta"] = 40000.0
        if rope:
            cfg["rope_scaling"] = rope
    return edit


def t5_style(**rope):
    def edit(cfg):
        cfg.pop("rope_theta", None), cfg.pop("rope_scaling", None)
        cfg["rope_parameters"] = rope
    return edit


# name: (model_type, write_target overrides, config.json edit, the rope_type transformers must then read)
CASES = {
    "llama": ("llama", {}, None, "default"),
    "mistral": ("mistral", {}, None, "default"),
    "qwen2": ("qwen2", {}, None, "default"),                               # q/k/v biases
    "llama-biases": ("llama", {"attention_bias": True, "mlp_bias": True}, None, "default"),  # + o, mlp biases
    "qwen3-head-dim": ("qwen3", {"head_dim": 32}, None, "default"),       # nH*d = 128 != H = 64, q/k norms
    "rope-llama3": ("llama", {"rope_parameters": LLAMA3}, None, "llama3"),
    "rope-linear": ("llama", {"rope_parameters": {"rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0}},
                    None, "linear"),
    "rope-yarn": ("llama", {"rope_parameters": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                                                "original_max_position_embeddings": 16}}, None, "yarn"),
    "t4-legacy-type": ("llama", {}, t4_style(type="linear", factor=2.0), "linear"),
    "t4-llama3": ("llama", {}, t4_style(**{k: v for k, v in LLAMA3.items() if k != "rope_theta"}), "llama3"),
    "t4-theta-only": ("mistral", {}, t4_style(), "default"),
    "t5-rope-parameters": ("qwen2", {}, t5_style(rope_type="default", rope_theta=30000.0), "default"),
    "tied": ("llama", {"tie_word_embeddings": True}, None, "default"),
}


@pytest.fixture(scope="module")
def targets(tmp_path_factory):
    made: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in made:
            model_type, overrides, edit, _ = CASES[name]
            folder = write_target(tmp_path_factory.mktemp(name), model_type, num_hidden_layers=2, **overrides)
            if edit is not None:
                path = folder / "config.json"
                cfg = json.loads(path.read_text())
                edit(cfg)
                path.write_text(json.dumps(cfg))
            made[name] = folder
        return made[name]

    return get


def reference(folder: Path, ids: torch.Tensor) -> torch.Tensor:
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    with torch.no_grad():
        return model(ids).logits


def ours(folder: Path, backend=backends.sdpa):
    model, _ = load_target(folder, default_registry(), backend, dtype=torch.float32, device="cpu")
    return model


def full_logits(model, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        hidden, _ = model(ids, torch.arange(ids.shape[1]).expand_as(ids))
        return model.logits(hidden)


def ids_for(seed: int, B: int = 2, T: int = 24) -> torch.Tensor:
    return torch.randint(0, 96, (B, T), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("name", sorted(CASES))
def test_target_logits_match_transformers(targets, name):
    folder = targets(name)
    cfg = AutoConfig.from_pretrained(folder)
    assert cfg.rope_parameters["rope_type"] == CASES[name][3]  # the config edit took the intended form
    ids = ids_for(0)
    want = reference(folder, ids)
    got = full_logits(ours(folder), ids)
    assert want.std() > 0.1  # random weights big enough that a wrong layer shows at 1e-4
    torch.testing.assert_close(got, want, atol=ATOL, rtol=0)


def test_eager_backend_matches_transformers_too(targets):
    folder, ids = targets("qwen3-head-dim"), ids_for(1)
    torch.testing.assert_close(full_logits(ours(folder, backends.eager), ids), reference(folder, ids),
                               atol=ATOL, rtol=0)


def test_rope_variants_change_the_frequencies(targets):
    """The rope cases are not the default in disguise: each gives other frequencies or another scale."""
    def rope(name):
        r = ours(targets(name)).model.layers[0].self_attn.rope
        return r.inv_freq, r.scale

    base_freq, _ = rope("llama")
    for name in ("rope-llama3", "rope-linear", "rope-yarn", "t4-legacy-type", "t4-llama3", "t4-theta-only",
                 "t5-rope-parameters"):
        freq, scale = rope(name)
        assert not torch.allclose(freq, base_freq) or scale != 1.0, name


def test_tied_embeddings_share_one_tensor(targets):
    folder = targets("tied")
    from safetensors import safe_open

    with safe_open(str(folder / "model.safetensors"), "pt") as f:
        assert "lm_head.weight" not in set(f.keys())  # the checkpoint really lacks the head
    model = ours(folder)
    assert model.lm_head.weight is model.model.embed_tokens.weight
    assert not model.lm_head.weight.is_meta
    # what the load plan expects: the tied tensor once, under its first name
    for name, head_expected in (("tied", False), ("llama", True)):
        meta = build_target(AutoConfig.from_pretrained(targets(name)), default_registry(), backends.sdpa)
        expected = expected_of(meta)
        assert "model.embed_tokens.weight" in expected and ("lm_head.weight" in expected) == head_expected
        assert len(expected) == len(meta.state_dict()) - (not head_expected)


@pytest.mark.parametrize("name", ["llama", "qwen3-head-dim", "rope-yarn", "tied"])
def test_paged_prefill_then_decode_matches_transformers(targets, name):
    """Two sequences of different lengths: prefill a prefix of each in one batch, then decode the remaining
    given tokens one at a time (sequences drop out as they end); every logit row equals transformers'."""
    folder = targets(name)
    lengths, prefixes = [20, 13], [9, 4]
    ids = ids_for(2, B=2, T=max(lengths))
    want = [reference(folder, ids[b:b + 1, :n])[0] for b, n in enumerate(lengths)]
    model = ours(folder)
    # small pages and a small pool: page tables span several non-contiguous pages and the pool must grow
    pool = PagedKVPool([layer.self_attn.cache_layout() for layer in model.model.layers], page_size=3, num_pages=2)
    seqs = [pool.add_sequence() for _ in lengths]
    got = [[] for _ in lengths]
    with torch.no_grad():
        kv, pos = causal_batch(pool, seqs, prefixes, "cpu")
        hidden, _ = model(pad_tokens([ids[b, :p].tolist() for b, p in enumerate(prefixes)]), pos, kv)
        logits = model.logits(hidden)
        for b, p in enumerate(prefixes):
            pool.commit(seqs[b])
            got[b].extend(logits[b, :p])
        while live := [b for b in range(len(lengths)) if pool.length(seqs[b]) < lengths[b]]:
            kv, pos = causal_batch(pool, [seqs[b] for b in live], [1] * len(live), "cpu")
            tokens = torch.tensor([[int(ids[b, pool.length(seqs[b])])] for b in live])
            assert pos[:, 0].tolist() == [pool.length(seqs[b]) for b in live]
            logits = model.logits(model(tokens, pos, kv)[0])
            for row, b in enumerate(live):
                pool.commit(seqs[b])
                got[b].append(logits[row, 0])
    assert pool.num_pages > 2  # the pool grew
    for b in range(len(lengths)):
        torch.testing.assert_close(torch.stack(got[b]), want[b], atol=ATOL, rtol=0)


@pytest.mark.parametrize("model_type, hint", [("starcoder2", ""), ("lama", "Did you mean 'llama'?")])
def test_unknown_model_type_lists_the_known_targets(targets, tmp_path, model_type, hint):
    folder = tmp_path / "t"
    folder.mkdir()
    cfg = json.loads((targets("llama") / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, "model_type": model_type}))
    (folder / "model.safetensors").symlink_to(targets("llama") / "model.safetensors")
    with pytest.raises(UnknownComponent) as info:
        ours(folder)
    text = str(info.value)
    assert f"unknown target '{model_type}'" in text and hint in text
    assert "known: " + ", ".join(f"{name} (builtin)" for name in sorted(TARGETS)) in text   # every type, in order
