"""A draft's starting point and its export, both in the spec's own checkpoint layout.

The starting folder is written by the upstream-layout writers of :mod:`draftsmith.testing` (the row of
:data:`MAKERS` for the spec's fusion kind: EAGLE-3 or EAGLE-1), then loaded through :func:`draftsmith.assemble`,
so training runs the very modules that inference builds. Export maps the canonical names back through the spec's
weight rules (``layers.0.*`` -> ``midlayer.*`` for a 1-layer eagle3-llama draft; ``layers.N.*`` kept for a deeper
one), or through those of the layout the spec's rules write where layouts.yaml has one (speculators' ``layers.N.*``
for eagle3-speculators), and writes config.json with the draft vocabulary and the taps.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file

import draftsmith
from draftsmith.assembler.build import rule_set
from draftsmith.assembler.checkpoint import read_json, save_safetensors
from draftsmith.assembler.config import target_text_keys as config_text_keys
from draftsmith.assembler.explain import TRAIN_STEP, TRAIN_STEPS
from draftsmith.errors import DraftsmithError
from draftsmith.assembler.vocab import make_vocab_map
from draftsmith.components.eagle3_config import drafted_norm_output
from draftsmith.registry import default_registry
from draftsmith.specs.resolve import fusion_params
from draftsmith.testing import write_eagle1, write_eagle3
from draftsmith.train.makers import Maker, Need, refusals


def for_training(spec):
    """The spec as training assembles it: the draft in float32 whatever its ``decoding.draft_dtype`` says (a
    bfloat16 draft_dtype trained bf16 weights with a bf16 optimizer; the export is cast by --export-dtype). The
    decoding section is no part of the run's record (resume.spec_digest), so a resumed run compares alike."""
    return draftsmith.load_spec(spec).with_decoding(draft_dtype="float32")


def unsupported(spec) -> list[str]:
    """What of ``spec`` a fresh draft (:func:`init_draft`) cannot have, one phrase each; [] when it can be made.
    The rows of :data:`MAKERS` make the layouts of :data:`MAKES`; anything else (MLA attention, an MTP fusion,
    quantized weights) would be refused by the load, or fail deeper, after the run has started."""
    return refusals(spec, MAKERS, COMMON)


def export_refusals(spec) -> list[str]:
    """What of ``spec`` the export of a trained draft (any run, fresh or --from-draft) cannot write, one phrase
    each with what to do instead; [] when it can. Refused by the export only after the run has trained."""
    return [f"{said}: {need.fix}" for need in EXPORTS if (said := need.refusal(spec))]


def fresh_taps(spec, target_layers: int) -> tuple[int, ...]:
    """The taps (layer inputs) of a fresh EAGLE-3 draft of ``spec``: its aux ids, else the default
    [2, L//2, L-3]; a SpecError when they do not fit the target (or num_aux)."""
    from draftsmith.components.eagle3_config import resolve_taps

    return resolve_taps(fusion_params(spec), {}, target_layers)


def _canonical_norms(tensors: dict) -> dict:
    # write_eagle3's upstream names of the fusion norms -> the canonical ones, which every spec loads as they are
    rename = lambda n: ("fc.aux_norm." + n.removeprefix("fc_norm.") if n.startswith("fc_norm.")  # noqa: E731
                        else "fc.input_norm.weight" if n == "input_norm.weight" else n)
    return {rename(n): t for n, t in tensors.items()}


def is_norm(name: str) -> bool:
    """A norm's parameter: 'norm.weight', 'layers.0.input_layernorm.weight', 'fc.aux_norm.1.weight'."""
    return any("norm" in part for part in name.split(".")[:-1])


def init_draft(spec, target_dir: Path, folder: Path, kept: torch.Tensor | None, seed: int = 0,
               init_std: float = 0.02):
    """Write a fresh draft for ``spec`` to ``folder`` and return it assembled next to the target (float32, CPU).

    Its structure is the spec's: EAGLE-3 with num_layers layers (1 for auto), the spec's aux ids (stated in its
    config in the spec's ``at`` convention) or the default three, and the fusion norms its fc_norm /
    norm_before_fc ask for (auto: none); EAGLE-1 with the fc bias it asks for. :func:`unsupported` says what else
    it cannot make. kept: the target ids of the reduced vocabulary (sorted; its d2t is written in the
    spec's ``vocab.d2t`` convention), or None for the full one. Linear
    layers start at N(0, init_std), norms at 1; an own lm_head starts from the target's head rows of the kept ids
    and the final norm from the target's, so step 0 already speaks the target's output space
    (:func:`start_from_target` then starts the layers from the target's last one)."""
    spec = for_training(spec)
    tc = target_text_keys(target_dir)
    V = tc["vocab_size"]
    if (maker := MAKERS.get(spec.draft.fusion.kind)) is None:   # preflight refuses it first (fresh_problems)
        raise ValueError(f"{spec.name}: train cannot make a fresh draft with {unsupported(spec)[0]}; it makes "
                         f"{MAKES}")
    maker.write(spec, target_dir, Path(folder), kept, tc, seed)
    model = draftsmith.assemble(spec, target=target_dir, draft=folder)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.draft.named_parameters():
            if is_norm(name):
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


def target_text_keys(target_dir) -> dict[str, Any]:
    """The target's config.json as its text model's keys (:func:`~draftsmith.assembler.config.target_text_keys`:
    the sizes a Hub text_config leaves to its type's defaults filled)."""
    return config_text_keys(target_dir)


def _write_eagle3(spec, target_dir, folder: Path, kept, tc: dict, seed: int) -> None:
    params, V = fusion_params(spec), tc["vocab_size"]
    taps = fresh_taps(spec, tc["num_hidden_layers"])
    write_eagle3(folder, target_dir, seed=seed, draft_vocab=None if kept is None else len(kept), layout="layers",
                 layers=1 if spec.draft.num_layers == "auto" else spec.draft.num_layers,
                 aux_ids=stated_ids(taps, spec), fc_norm=params.fc_norm is True,
                 norm_before_fc=params.norm_before_fc is True)
    tensors = _canonical_norms(load_file(str(folder / "model.safetensors")))
    if kept is not None and len(kept) < V:
        tensors["d2t"], tensors["t2d"] = make_vocab_map(kept, V)
        tensors["d2t"] = stated_d2t(tensors["d2t"], spec)
    save_safetensors(tensors, folder)


def _write_eagle1(spec, target_dir, folder: Path, kept, tc: dict, seed: int) -> None:
    write_eagle1(folder, target_dir, seed=seed, bias=fusion_params(spec).bias is True)   # the target's vocabulary


COMMON = (Need("layer kind", {"draft.layer.kind": ("llama",)}),   # what every row's writer makes
          Need("mlp kind", {"draft.mlp.kind": ("swiglu",)}),
          Need("norm kind", {"draft.norm.kind": ("rms",)}),
          Need("attention kind", {"draft.attention.kind": ("gqa", "auto")}),
          Need("quant method", {"quant.method": ("none",)}),
          Need("share.embed", {"draft.share.embed": ("target",)}))

class SplitRules:
    """The spec's weight rules that split a fused tensor into parts, found by what each built rule does (a
    ``parts`` method: the built-in ``split`` kind or a plugin's), not by its kind's name."""
    fix = ("the export would have to fuse the trained parts back into one tensor, which it does not do; train with "
           "the same spec without its split rules (a fresh draft is written unfused, then exported by the spec's "
           "other rules)")

    @staticmethod
    def refusal(spec) -> str | None:
        try:
            rules = rule_set(spec, default_registry()).rules
        except DraftsmithError:   # a rule that cannot be built is the spec's own problem, said where it is built
            return None
        hits = sum(callable(getattr(rule, "parts", None)) for rule in rules)
        return f"{hits} split rule(s) in weights.rules" if hits else None


EXPORTS = (SplitRules(),)   # what export (weights.RuleSet.from_canonical) cannot write back

MAKERS = {   # fusion kind -> the fresh draft init_draft writes for it
    "eagle3": Maker("EAGLE-3", "llama layers with input norms in every layer, gqa attention, swiglu, rms norms, a "
                    "final norm, the draft's own lm_head, the target's embedding, no quantization; any layer count, "
                    "aux ids, fc_norm or norm_before_fc", _write_eagle3,
                    needs=(Need("norms", {"draft.norms.input": ("all",), "draft.norms.final": (True,)}),
                           Need("share.lm_head", {"draft.share.lm_head": ("draft",)})),
                    reduced_vocab=True),
    "eagle1": Maker("EAGLE-1", "one llama layer without an input norm, no final norm, the target's embedding and "
                    "head, no quantization", _write_eagle1,
                    needs=(Need("num_layers", {"draft.num_layers": ("auto", 1)}),
                           Need("norms", {"draft.norms.input": ("not_first", "none"), "draft.norms.final": (False,)}),
                           Need("fusion.embed_norm", {"draft.fusion.embed_norm": (None, False)}),
                           Need("share.lm_head", {"draft.share.lm_head": ("target",)}))),
}
MAKES = " and ".join(m.said for m in MAKERS.values())   # what init_draft writes; preflight names it


def start_from_target(model) -> tuple[list[str], list[str]]:
    """Start every draft layer from the target's last layer, read through the fusion's last input block.

    A draft weight takes its namesake in the target's last layer when the shapes match, or fills its last input
    columns when it reads k target widths (EAGLE-3's q/k/v over [embedding; hidden]: the hidden half); a layer's
    ``hidden_norm`` (the norm on the fused hidden stream) takes the target layer's input norm, while that layer's
    input norm, the embedding's, stays at 1; the fusion linear adds the identity on its last input block
    (EAGLE-3's last tap, EAGLE-1's hidden state) when that block is as wide as the draft. So the draft starts as
    one more target layer over the deepest state it is given; the embedding's columns keep their random start.
    On the SmolLM2 pair (200 steps, one layer, held-out stdlib text) this took the step-0 top-1 / top-4 from
    0.317 / 0.512 to 0.401 / 0.587. Returns the names of the draft parameters it set (none: a layer type whose
    names and shapes match nothing in the target's), and those of the draft layer weights it leaves at their fresh
    start for want of a namesake of a shape it can take in the target's last layer (a mixture-of-experts or
    latent-attention layer's differ from a Llama draft layer's), the embedding's norm, kept at 1 on purpose, aside:
    one walk of the draft's weights gives both."""
    done, left = [], []
    with torch.no_grad():
        for name, p, w in _namesakes(model):
            if w is None:
                left.append(name)
                continue
            p[..., p.shape[-1] - w.shape[-1]:] = w
            done.append(name)
        fc = getattr(model.draft, "fc", None)
        if fc is not None and getattr(fc, "target_width", None) == getattr(fc, "out_features", None):   # square
            fc.weight[:, -fc.out_features:] += torch.eye(fc.out_features, dtype=fc.weight.dtype)
            done.append("fc.weight")
    return done, left


def _namesakes(model):
    """(name, draft weight, the target's last-layer weight it starts from or None) for each draft layer weight
    :func:`start_from_target` considers."""
    last = dict(model.target.model.layers[-1].named_parameters())
    for name, p in model.draft.named_parameters():
        parts = name.split(".")
        if parts[0] != "layers" or p.dim() == 0:
            continue
        layer, key = model.draft.layers[int(parts[1])], ".".join(parts[2:])
        if key.startswith("input_layernorm.") and any(n.startswith("hidden_norm.") for n, _ in
                                                      layer.named_parameters()):
            continue   # the embedding's norm: the hidden stream's norm is the one that takes the target's
        w = last.get(key.replace("hidden_norm.", "input_layernorm."))
        yield name, p, None if w is None or w.shape[0] != p.shape[0] or p.shape[-1] % w.shape[-1] else w


def tap_convention(spec) -> str:
    """'output' when the spec reads a config's tap ids as layer outputs (``aux_layers: {at: output}``, SGLang),
    else 'input' (HF hidden_states[id], vLLM; EAGLE-1 has no taps)."""
    aux = getattr(fusion_params(spec), "aux_layers", "auto")   # a fusion without taps has none
    return "output" if aux != "auto" and aux.at == "output" else "input"


def stated_ids(taps, spec) -> list[int]:
    """The taps (layer INPUT indices, as ``model.draft.taps`` holds them) as the spec reads a config's ids: one
    less each under ``at: output``. Written as they are, such a spec would read them one layer deeper on reload
    (trained on [2, 4, 5], reloaded as (3, 5, 6)), and a --from-draft copy would move them too."""
    shift = 1 if tap_convention(spec) == "output" else 0
    return [int(t) - shift for t in taps]


def with_ids(config: Mapping[str, Any], taps, target_layers: int, spec) -> dict[str, Any]:
    """``config`` stating the taps a draft was trained with: left out where they are the default layers (2, L//2,
    L-3, at their inputs), which every engine takes for an absent key; else ``eagle_config``'s
    ``eagle_aux_hidden_state_layer_ids`` in the spec's convention (:func:`stated_ids`; its other keys kept). Explicit
    ids are read one layer apart by SGLang (a layer's output) and vLLM (its input): a default draft states none."""
    from draftsmith.components.eagle3_config import KEY, default_taps

    # the ids a reader may take instead (a top-level key, Qwen3-style target_layer_ids): a source's, now stale
    config = {k: v for k, v in config.items() if k not in (KEY, "target_layer_ids")}
    inner = config.get("eagle_config")   # a value that is no mapping is read by no engine: replaced
    eagle = {k: v for k, v in (inner.items() if isinstance(inner, Mapping) else ()) if k != KEY}
    if [int(t) for t in taps] != default_taps(target_layers):
        eagle[KEY] = stated_ids(taps, spec)
    return {k: v for k, v in config.items() if k != "eagle_config"} | ({"eagle_config": eagle} if eagle else {})


def with_base(config: Mapping[str, Any], spec) -> dict[str, Any]:
    """``config`` stating the rope base the draft was trained with where the spec sets one
    (``draft.attention.rope_theta``: 10000 or a number; EAGLE's trainers rotate with 10000 whatever the config
    says): every reader takes a draft config's ``rope_theta``, so the export says the trained base there (in
    ``rope_parameters`` too where the config keeps one, under ``transformer_layer_config`` in speculators' style)."""
    from draftsmith.components.dims import per_layer_type

    theta = spec.draft.attention.params.get("rope_theta", "auto")   # as validated (attention auto holds no model)
    inner = "transformer_layer_config" if isinstance(config.get("transformer_layer_config"), Mapping) else None
    held = dict(config[inner] if inner else config)
    if theta == "auto" or per_layer_type(held.get("rope_parameters")):   # the latter is refused at load
        return dict(config)
    held["rope_theta"] = float(theta)
    if isinstance(held.get("rope_parameters"), Mapping):
        held["rope_parameters"] = {**held["rope_parameters"], "rope_theta": float(theta)}
    return {**config, inner: held} if inner else held


def stated_d2t(offsets: torch.Tensor, spec) -> torch.Tensor:
    """d2t as the spec's ``vocab.d2t`` reads it: the offsets the model keeps (target = draft + d2t[draft]), or the
    target ids themselves under ``absolute``. Offsets written for such a spec fail its load's map check, which
    blamed the draft folder for what train had written."""
    if spec.draft.vocab.d2t == "absolute":
        return offsets + torch.arange(offsets.shape[0], dtype=offsets.dtype)
    return offsets


def checkpoint_names(rules, names: Iterable[str]) -> dict[str, str]:
    """The checkpoint name of each canonical name of a draft, through the rules' inverses. A rule that renames a
    tensor in some of the layers that hold it and not in the others is not used: eagle3-llama's ``^midlayer\\.`` ->
    ``layers.0.`` names the one layer of a 1-layer draft, but in a deeper one its inverse would rename layer 0 alone
    (midlayer.* beside layers.1.*, a layout inspect does not recognise and convert refuses), so the names it would
    rename keep their ``layers.N.*`` names, which the rules read back as themselves (SpecForge's layout). A rule
    that renames every layer's tensor (a YAML family's ``inverse:``) is followed."""
    names = list(names)
    back = {n: rules.from_canonical(n) for n in names}
    used = {n: rules.to_canonical(back[n])[1] if back[n] != n else None for n in names}   # the rule that renamed n
    holders: dict[str, set[str]] = {}                # a layer tensor's suffix -> the names that hold it
    renamed: dict[int, dict[str, set[str]]] = {}     # rule -> suffix -> the names of it the rule renamed
    for n in names:
        if (m := re.match(r"layers\.\d+\.(.+)", n)) is not None:
            holders.setdefault(m[1], set()).add(n)
            if used[n] is not None:
                renamed.setdefault(used[n], {}).setdefault(m[1], set()).add(n)
    partial = {i for i, by in renamed.items() if any(held != holders[s] for s, held in by.items())}
    return {n: n if used[n] in partial and rules.to_canonical(n) == (n, None) else back[n] for n in names}


def trained_norm_output(draft) -> str | None:
    """The fusion's ``norm_output`` as the trained ``draft`` runs it (drafted_norm_output: ``draft.feed_back:
    post_norm`` beside a head norm is ``feed_back``); None for a draft whose fusion has none (EAGLE-1's)."""
    fed = "post_norm" if getattr(draft, "feed_post_norm", False) else "pre_norm"
    return drafted_norm_output(getattr(getattr(draft, "fc", None), "norm_output", None), fed)


def with_verifier(config: dict[str, Any], target: Path | None) -> dict[str, Any]:
    """``config`` with its speculators verifier named where it names none (the style's template: null, or ""): the
    target the draft was trained against, its folder as the run was given it (not resolved: a relative path stays
    relative, links are not followed) and its config's architectures ([] when it states none, as speculators
    writes), which vLLM and speculators read to pair the draft with its target; a draft to be published names a
    Hub id there instead. A verifier a source named is kept."""
    verifier = (config.get("speculators_config") or {}).get("verifier")
    if target is None or not isinstance(verifier, Mapping) or verifier.get("name_or_path") not in (None, ""):
        return config
    architectures = read_json(Path(target) / "config.json", Path(target)).get("architectures") or []
    named = {**verifier, "name_or_path": str(target), "architectures": architectures}
    return {**config, "speculators_config": {**config["speculators_config"], "verifier": named}}


def export_draft(model, folder: Path, *, dtype: torch.dtype = torch.bfloat16, source: Path | None = None,
                 progress: tuple[int, int] | None = None) -> Path:
    """Write ``model.draft`` to ``folder`` in its spec's layout: model.safetensors (floats in ``dtype``, t2d as it
    is, d2t in the spec's ``vocab.d2t`` convention) and its config (from ``source``'s, with draft_vocab_size and
    the taps stated in the spec's ``aux_layers.at`` convention, so that the spec reads them back as the same
    taps). Where layouts.yaml has a layout of the spec's weight rules (:func:`draftsmith.convert.layouts.own_layout`:
    eagle1-speculators, speculators for eagle3-speculators), the names are that layout's and the config is the one
    convert writes for them (:func:`~draftsmith.convert.layouts.layout_config`: speculators' config, its flags read from
    the trained draft and its tensors, a source's ``speculators_config`` kept); else the spec's names in
    ``source``'s style. ``progress`` (step, steps): a training checkpoint's, kept in the weights' metadata, so that a
    load of a draft whose run stopped early says so (:func:`draftsmith.assembler.explain.training_note`)."""
    from draftsmith.assembler.styles import STYLES, style_of, to_facts
    from draftsmith.convert.layouts import layout_config, layout_facts, own_layout

    folder, source = Path(folder), Path(source or folder)
    rules = rule_set(model.spec, default_registry())
    layout = own_layout(rules)
    state = model.draft.state_dict()
    if "d2t" in state:
        state["d2t"] = stated_d2t(state["d2t"], model.spec)
    named = rules if layout is None else layout.rules   # the spec reads the layout's names (own_layout)
    written = checkpoint_names(named, state)
    tensors = {written[k]: (v.detach().to(dtype) if v.is_floating_point() else v.detach()).cpu()
               for k, v in state.items()}
    old = source / "model.safetensors"
    if old.is_file() and "embed_tokens.weight" in load_file(str(old)) and "embed_tokens.weight" not in tensors:
        # a frozen copy of the target's embedding, as the upstream layout carries it
        tensors["embed_tokens.weight"] = model.target.model.embed_tokens.weight.detach().to(dtype).cpu()
    config = json.loads((source / "config.json").read_text())
    src_style = style_of(source, config)
    trained = {}   # what the draft was trained with that a flat config has no key for, stated in a layout's
    if hasattr(model.draft, "d2t"):
        config["draft_vocab_size"] = int(model.draft.d2t.shape[0])
    if model.draft.taps:
        config = with_ids(config, model.draft.taps, len(model.target.model.layers), model.spec)
        # engines disagree on its default: the config states what the draft was trained with
        config["norm_before_residual"] = bool(model.draft.fc.norm_before_residual)
        trained["norm_output"] = trained_norm_output(model.draft)
    config = with_base(config, model.spec)
    config["torch_dtype"] = str(dtype).removeprefix("torch.")
    # a run reads and resumes its draft from config.json (preflight): a layout whose config is another file (Mistral's
    # params.json) is left to `draftsmith convert`
    if layout is not None and STYLES[layout.config].file == "config.json":   # as convert writes it
        config = layout_config(layout, layout_facts(layout, to_facts(config, src_style) | trained, state), config,
                               src_style, tensors)
        config = with_verifier(config, model.folders.get("target"))
    folder.mkdir(parents=True, exist_ok=True)
    said = {} if progress is None else {TRAIN_STEP: str(progress[0]), TRAIN_STEPS: str(progress[1])}
    save_safetensors({k: v.contiguous() for k, v in tensors.items()}, folder, metadata=said)
    tmp = folder / "config.json.tmp"   # renamed over it, as the weights are: a killed run leaves a whole file
    tmp.write_text(json.dumps(config, indent=2) + "\n")
    tmp.replace(folder / "config.json")
    for f in folder.iterdir():
        if f.is_file():   # readable by everyone, as a shipped draft is; a feature cache inside keeps its mode
            f.chmod(0o644)
    return folder
