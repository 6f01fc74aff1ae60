"""A draft's starting point and its export, both in the spec's own checkpoint layout.

The starting folder is written by the upstream-layout writers of :mod:`draftsmith.testing` (EAGLE-3 or EAGLE-1 by
the spec's fusion kind), then loaded through :func:`draftsmith.assemble`, so training runs the very modules that
inference builds. Export maps the canonical names back through the spec's weight rules
(``layers.0.*`` -> ``midlayer.*`` for eagle3-llama) and writes config.json with the draft vocabulary and the taps.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file

import draftsmith
from draftsmith.assembler.build import rule_set
from draftsmith.assembler.checkpoint import save_safetensors
from draftsmith.assembler.vocab import make_vocab_map
from draftsmith.components.weights import RuleSet
from draftsmith.registry import default_registry
from draftsmith.testing import write_eagle1, write_eagle3


def init_draft(spec, target_dir: Path, folder: Path, kept: torch.Tensor | None, seed: int = 0,
               init_std: float = 0.02):
    """Write a fresh draft for ``spec`` to ``folder`` and return it assembled next to the target (float32, CPU).

    kept: the target ids of the reduced vocabulary (sorted), or None for the full one. Linear layers start at
    N(0, init_std); an own lm_head starts from the target's head rows of the kept ids and the final norm from
    the target's, so step 0 already speaks the target's output space (:func:`start_from_target` then starts the
    layers from the target's last one)."""
    spec = draftsmith.load_spec(spec)
    V = json.loads((Path(target_dir) / "config.json").read_text())["vocab_size"]
    folder = Path(folder)
    if spec.draft.fusion.kind == "eagle1":
        write_eagle1(folder, target_dir, seed=seed, bias=False)
    else:
        write_eagle3(folder, target_dir, seed=seed, draft_vocab=None if kept is None else len(kept), layout="layers")
        if kept is not None and len(kept) < V:
            tensors = load_file(str(folder / "model.safetensors"))
            tensors["d2t"], tensors["t2d"] = make_vocab_map(kept, V)
            save_safetensors(tensors, folder)
    model = draftsmith.assemble(spec, target=target_dir, draft=folder)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.draft.named_parameters():
            if name.endswith("norm.weight") or ".norm" in name or name.startswith("norm"):
                p.fill_(1.0)
            elif p.dim() == 2:
                p.copy_(torch.randn(p.shape, generator=g) * init_std)
            else:
                p.zero_()
        if hasattr(model.draft, "lm_head"):
            rows = torch.arange(V) if kept is None else kept
            model.draft.lm_head.weight.copy_(model.target.lm_head.weight[rows])
            if isinstance(model.draft.norm, torch.nn.Module) and hasattr(model.draft.norm, "weight"):
                model.draft.norm.weight.copy_(model.target.model.norm.weight)
    return model


def start_from_target(model) -> list[str]:
    """Start every draft layer from the target's last layer, read through the fusion's last input block.

    A draft weight takes its namesake in the target's last layer when the shapes match, or fills its last input
    columns when it reads k target widths (EAGLE-3's q/k/v over [embedding; hidden]: the hidden half); a layer's
    ``hidden_norm`` (the norm on the fused hidden stream) takes the target layer's input norm, while that layer's
    input norm, the embedding's, stays at 1; the fusion linear adds the identity on its last input block
    (EAGLE-3's last tap, EAGLE-1's hidden state) when that block is as wide as the draft. So the draft starts as
    one more target layer over the deepest state it is given; the embedding's columns keep their random start.
    On the SmolLM2 pair (200 steps, one layer, held-out stdlib text) this took the step-0 top-1 / top-4 from
    0.317 / 0.512 to 0.401 / 0.587. Returns the names of the draft parameters it set (none: a layer type whose
    names and shapes match nothing in the target's)."""
    last = dict(model.target.model.layers[-1].named_parameters())
    done = []
    with torch.no_grad():
        for name, p in model.draft.named_parameters():
            parts = name.split(".")
            if parts[0] != "layers" or p.dim() == 0:
                continue
            layer, key = model.draft.layers[int(parts[1])], ".".join(parts[2:])
            if key.startswith("input_layernorm.") and any(n.startswith("hidden_norm.") for n, _ in
                                                          layer.named_parameters()):
                continue   # the embedding's norm: the hidden stream's norm is the one that takes the target's
            w = last.get(key.replace("hidden_norm.", "input_layernorm."))
            if w is None or w.shape[0] != p.shape[0] or p.shape[-1] % w.shape[-1]:
                continue
            p[..., p.shape[-1] - w.shape[-1]:] = w
            done.append(name)
        fc = getattr(model.draft, "fc", None)
        if getattr(fc, "target_width", None) == getattr(fc, "out_features", None):   # a square last block
            fc.weight[:, -fc.out_features:] += torch.eye(fc.out_features, dtype=fc.weight.dtype)
            done.append("fc.weight")
    return done


def tap_convention(spec) -> str:
    """'output' when the spec reads a config's tap ids as layer outputs (``aux_layers: {at: output}``, SGLang),
    else 'input' (HF hidden_states[id], vLLM; EAGLE-1 has no taps)."""
    aux = spec.draft.fusion.params.get("aux_layers") if spec.draft.fusion.kind == "eagle3" else None
    return "output" if isinstance(aux, dict) and aux.get("at") == "output" else "input"


def stated_ids(taps, spec) -> list[int]:
    """The taps (layer INPUT indices, as ``model.draft.taps`` holds them) as the spec reads a config's ids: one
    less each under ``at: output``. Written as they are, such a spec would read them one layer deeper on reload
    (trained on [2, 4, 5], reloaded as (3, 5, 6)), and a --from-draft copy would move them too."""
    shift = 1 if tap_convention(spec) == "output" else 0
    return [int(t) - shift for t in taps]


def layout_name(rules: RuleSet, name: str) -> str:
    """The checkpoint name export writes for the canonical ``name``: the spec's layout, through its renaming
    rules (layers.0. -> midlayer.), but not through a rule that only strips an optional prefix (``^model\.`` ->
    '', NeMo's): its inverse would prefix every name (model.d2t, model.fc.weight), while the rule is there to
    load such drafts too, not to define the layout. Falls back to the rules' own inverse when the name this
    gives would not load back as ``name``."""
    renaming = RuleSet([r for r in rules.rules if getattr(r, "replace", None) != ""], rules.ignore)
    try:
        candidate = renaming.from_canonical(name)
    except ValueError:
        candidate = None
    if candidate is not None and rules.to_canonical(candidate)[0] == name:
        return candidate
    return rules.from_canonical(name)


def export_draft(model, folder: Path, *, dtype: torch.dtype = torch.bfloat16, source: Path | None = None) -> Path:
    """Write ``model.draft`` to ``folder`` in its spec's layout: model.safetensors (floats in ``dtype``, d2t / t2d
    as they are) and config.json (from ``source``'s, with draft_vocab_size and the taps stated in the spec's
    ``aux_layers.at`` convention, so that the spec reads them back as the same taps)."""
    folder, source = Path(folder), Path(source or folder)
    rules = rule_set(model.spec, default_registry())
    tensors = {layout_name(rules, k): (v.detach().to(dtype) if v.is_floating_point() else v.detach()).cpu()
               for k, v in model.draft.state_dict().items()}
    old = source / "model.safetensors"
    if old.is_file() and "embed_tokens.weight" in load_file(str(old)) and "embed_tokens.weight" not in tensors:
        # a frozen copy of the target's embedding, as the upstream layout carries it
        tensors["embed_tokens.weight"] = model.target.model.embed_tokens.weight.detach().to(dtype).cpu()
    config = json.loads((source / "config.json").read_text())
    if hasattr(model.draft, "d2t"):
        config["draft_vocab_size"] = int(model.draft.d2t.shape[0])
    if model.draft.taps:
        config["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": stated_ids(model.draft.taps, model.spec)}
    config["torch_dtype"] = str(dtype).removeprefix("torch.")
    folder.mkdir(parents=True, exist_ok=True)
    save_safetensors({k: v.contiguous() for k, v in tensors.items()}, folder)
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    for f in folder.iterdir():
        if f.is_file():   # readable by everyone, as a shipped draft is; a feature cache inside keeps its mode
            f.chmod(0o644)
    return folder
