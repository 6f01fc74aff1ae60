"""``SpeculativeModel``: what ``assemble`` returns — a target, a draft and the settings to decode with them."""
from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from draftsmith.components import fused
from draftsmith.components.rope import draft_positions_note
from draftsmith.decoding import engine, runners
from draftsmith.decoding.arguments import check_call, check_overrides, stop_ids, vocab_sizes
from draftsmith.decoding.graphs import graphs_enabled
from draftsmith.decoding.static_pool import StaticKVPool, capacity_for
from draftsmith.decoding.modes import Plan, choose_mode
from draftsmith.decoding.room import check_room, pool_bytes
from draftsmith.decoding.stats import Output
from draftsmith.values import scalar
from draftsmith.specs.resolve import unreached_steps

log = logging.getLogger("draftsmith")

Prompt = str | Sequence[int] | Sequence[Mapping[str, str]]   # text, token ids, or a conversation (draftsmith.chat)


def on_device(device: str | torch.device):
    """The model's CUDA device as the current one while it decodes: streams, graph captures and events are made on
    the current device, so a model on cuda:1 decodes there whichever device the caller made current."""
    device = torch.device(device)
    return torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()


def draft_parts(target: nn.Module, draft: nn.Module) -> tuple[nn.Module, nn.Module]:
    """(embedding, head) a draft runs with: its own (``embed_tokens``, ``lm_head``: modules a draft holds where its
    spec's ``share`` says own) or else the target's. assemble() chooses them so, and SpeculativeModel again at each
    call: a draft rebound (``model.draft = other``, ``dataclasses.replace``) kept the assembled draft's head, so its
    proposals were ranked by the old draft's head (its tau a mix of the two), and a target rebound kept the old
    target's embedding for a draft sharing it."""
    def own(name: str) -> nn.Module | None:
        part = getattr(draft, name, None)
        return part if isinstance(part, nn.Module) else None

    embed, head = own("embed_tokens"), own("lm_head")
    return (target.model.embed_tokens if embed is None else embed, target.lm_head if head is None else head)


@dataclass
class SpeculativeModel:
    target: nn.Module
    draft: nn.Module
    spec: Any                      # draftsmith.specs.schema.Spec
    tokenizer: Any | None
    stop_ids: frozenset[int]
    recurrent: bool = False
    device: str = "cpu"
    dtype: torch.dtype = torch.float32
    draft_dtype: torch.dtype | None = None   # spec decoding.draft_dtype (None: dtype)
    folders: Mapping[str, Path] = field(default_factory=dict)   # the checkpoint folders loaded: target, draft
    # runners by batch size and capacity (of the modules it holds): a model's own, never given (dataclasses.replace
    # makes new ones)
    _runners_cache: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    # one call decodes at a time: calls of the same batch size and length share the runners' KV pools (and CUDA
    # graphs), so two threads would write into each other's rows
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)
    # the target's and draft's parameters, listed once for the check of where they are (arguments.placement_problems)
    _params: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    _said: set = field(default_factory=set, init=False, repr=False, compare=False)   # warnings given once

    def __getstate__(self) -> dict:
        """For copy.deepcopy and pickle: the modules and settings; a copy makes its own private fields (the ones
        __init__ never takes: runners, lock, parameter list) as a new model does."""
        own = {f.name for f in fields(self) if not f.init}
        return {k: v for k, v in self.__dict__.items() if k not in own}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, **{f.name: f.default_factory() for f in fields(self) if not f.init})

    @property
    def draft_embed(self) -> nn.Module:
        """The token embedding the draft runs with: its own where its spec's ``share`` gave it one, else the
        target's; read from ``draft`` and ``target`` as they are now (:func:`draft_parts`)."""
        return draft_parts(self.target, self.draft)[0]

    @property
    def draft_head(self) -> nn.Module:
        """The head that ranks the draft's proposals: its own ``lm_head`` or the target's (:func:`draft_parts`)."""
        return draft_parts(self.target, self.draft)[1]

    # --- public -------------------------------------------------------------------------------------------
    def generate(self, prompt: Prompt | list[Prompt], max_new_tokens: int = 64, temperature: float = 0.0, *,
                 top_p: float = 1.0, top_k: int = 0, seed: int | None = None, topk: int | None = None,
                 steps: int | None = None, draft_tokens: int | None = None, mode: str | None = None,
                 stop: Iterable[int] | None = None):
        """Lossless speculative decoding: each output equals in distribution (token for token when greedy) what
        ``generate_baseline`` gives for the same prompt. Token for token holds in float32 and float64; in bfloat16
        (and float16 on CUDA) verifying several tokens in one forward and decoding one at a time round differently,
        so a near-tie (logits a rounding apart) can go the other way and the outputs part from there.

        prompt: a string (needs the target's tokenizer), a list of token ids, or a conversation: a list of
            ``{"role": ..., "content": ...}`` messages, rendered by the target tokenizer's chat template with the
            assistant's turn opened (``draftsmith.chat``); a list of prompts is a batch and
            gives a list of :class:`Output` (else one Output: ``token_ids``, ``text``, ``stats``). A batch's
            outputs share one :class:`Stats`, summed over its rows.
        max_new_tokens: at most this many tokens; fewer when a stop id is emitted (it is kept in the output).
        temperature: 0 is greedy; above 0 samples from the target's distribution filtered by ``top_p``
            (nucleus) and ``top_k`` (0: no cut).
        seed: seeds this call's own generator (None: a fresh random seed). torch's global generator is neither
            read nor advanced, so ``torch.manual_seed`` does not make a call reproducible; ``seed=`` does, for the
            same prompts in the same batch (a row's draws depend on its batch).
        topk, steps, draft_tokens: the draft tree of this call (None: the spec's ``decoding``): ``topk`` children
            per expanded node (1: a chain of ``steps`` tokens), ``steps`` draft forwards, ``draft_tokens`` nodes
            verified per step. Not to be confused with ``top_k``, the sampling filter.
        mode: "auto", "v1" (chain drafting: topk is taken as 1) or "v2" (trees); ``self.plan(...)`` shows the plan
            and why. stop: token ids that end a row (None: the target's end-of-text ids, from its configs).
        Bad arguments raise one ArgumentError listing every problem. Calls from several threads take turns: the
        model's KV pools serve one call at a time (batch the prompts for throughput)."""
        stop = stop_ids(stop, vocab_sizes(self)[0])   # read once: an iterator is checked and used as the same ids
        # a numpy count wrapped in the pool sizes; a 0-d tensor is a number
        max_new_tokens, temperature, top_p, top_k, seed = map(scalar, (max_new_tokens, temperature, top_p, top_k, seed))
        prompts, single = check_call(self, prompt, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p,
                                     top_k=top_k, seed=seed, stop=stop, topk=topk, steps=steps,
                                     draft_tokens=draft_tokens, mode=mode)  # ArgumentError lists every problem
        plan = self.plan(topk=topk, steps=steps, draft_tokens=draft_tokens, mode=mode)
        if (topk, steps, draft_tokens) != (None,) * 3:   # the spec's own values were warned of at its load
            self._warn_once(unreached_steps(plan.topk, plan.steps, plan.draft_tokens, plan.mode, 1),
                            f"generate() overrides of spec {self.spec.name}", per_text=True)
        self._warn_once(draft_positions_note(self.draft, max(map(len, prompts), default=0), max_new_tokens),
                        f"generate() with spec {self.spec.name}")
        settings = self._settings(max_new_tokens, temperature, top_p, top_k, seed, stop)
        with self._lock, torch.inference_mode(), on_device(self.device):
            seqs, stats = engine.speculative(*self._runners(prompts, max_new_tokens, plan), prompts, plan, settings)
        return self._outputs(seqs, stats, single)

    def generate_baseline(self, prompt: Prompt | list[Prompt], max_new_tokens: int = 64, temperature: float = 0.0,
                          *, top_p: float = 1.0, top_k: int = 0, seed: int | None = None,
                          stop: Iterable[int] | None = None, topk: Any = None, steps: Any = None,
                          draft_tokens: Any = None, mode: Any = None):
        """Target-only decoding with ``generate``'s prompt and sampling arguments: the reference for equality and
        speed. Draft arguments (topk, steps, draft_tokens, mode) are checked as ``generate`` checks them and
        otherwise ignored, so one dict of keywords serves both calls; any other keyword is a TypeError, as it is for
        ``generate``. Calls from several threads take turns (one model decodes one call at a time)."""
        if any(v is not None for v in (topk, steps, draft_tokens, mode)):   # the same values generate() refuses
            check_overrides(self, topk=topk, steps=steps, draft_tokens=draft_tokens, mode=mode,
                            what="generate_baseline() draft arguments")
        stop = stop_ids(stop, vocab_sizes(self)[0])
        max_new_tokens, temperature, top_p, top_k, seed = map(scalar, (max_new_tokens, temperature, top_p, top_k, seed))
        prompts, single = check_call(self, prompt, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p,
                                     top_k=top_k, seed=seed, stop=stop, what="generate_baseline()")
        settings = self._settings(max_new_tokens, temperature, top_p, top_k, seed, stop)
        with self._lock, torch.inference_mode(), on_device(self.device):
            seqs, stats = engine.baseline(self._runners(prompts, max_new_tokens, what="generate_baseline()")[0],
                                          prompts, settings)
        return self._outputs(seqs, stats, single)

    def plan(self, *, topk=None, steps=None, draft_tokens=None, mode=None) -> Plan:
        """The decoding plan: the spec's decoding section with per-call overrides, v1/v2 resolved; its reason names
        only what decides this plan (topk 1 is a chain whatever page_size says). The overrides get generate()'s
        checks (ArgumentError lists every problem)."""
        dec = check_overrides(self, topk=topk, steps=steps, draft_tokens=draft_tokens, mode=mode,
                              what=f"plan() overrides of spec {self.spec.name!r}")
        tree = dec["topk"] > 1   # a chain asked for: what rules trees out (page_size, recurrence) is not its reason
        plan = choose_mode(dec["mode"], dec["topk"], dec["steps"], dec["draft_tokens"], dec["page_size"] if tree else 1,
                           self.recurrent and tree)
        if draft_tokens is not None and (asked := scalar(draft_tokens)) != plan.draft_tokens:   # and not taken
            plan = replace(plan, reason=f"{plan.reason}; draft_tokens {asked} does not apply to a chain, which "
                                        f"verifies steps + 1 = {plan.draft_tokens}")
        return plan

    # --- internals ----------------------------------------------------------------------------------------
    def _warn_once(self, said: str | None, what: str, per_text: bool = False) -> None:
        """A warning about a call, once a model for each ``what`` (draft positions past its rotation's parity with
        transformers: the first call's values said, as its text names the prompt's length, which each call changes),
        or with ``per_text`` once for each text (a tree its overrides make that cannot reach its steps: a sweep of
        settings hears of each wasteful one)."""
        key = (what, said) if per_text else what
        if said is not None and key not in self._said:
            self._said.add(key)
            log.warning("draftsmith: %s: %s", what, said)

    def _layouts(self, model: nn.Module) -> tuple[list, torch.dtype]:
        """(each layer's KV cache layout, the pool's dtype) of the target or the draft."""
        layers = getattr(model, "layers", None) or model.model.layers
        return ([l.self_attn.cache_layout() for l in layers],
                (self.draft_dtype or self.dtype) if model is self.draft else self.dtype)

    def _pool(self, layouts: list, dtype: torch.dtype, rows: int, capacity: int) -> StaticKVPool:
        return StaticKVPool(layouts, rows=rows, capacity=capacity, dtype=dtype, device=self.device,
                            fused=fused.wanted(self.spec.decoding.graphs, self.device))

    def _runners(self, prompts: list[list[int]], max_new_tokens: int, plan: Plan | None = None,
                 what: str = "generate()"):
        """(target runner, draft runner) over static pools sized up front for this call: the longest prompt +
        max_new_tokens + the largest tree or draft scratch + what a step launched ahead commits
        (engine.slots_needed), rounded up to a capacity bucket (static_pool.capacity_for: 64, 80, 96, 112, 128,
        160, ..., less than a fifth unused) so that calls of nearby sizes share the pools and their CUDA graphs
        (cached by batch size and capacity, the 4 most recently used kept). A step attends over a key span that
        follows the context, not the capacity (runners.KeySpans), so a larger bucket costs memory only."""
        key = (len(prompts), capacity_for(engine.slots_needed(prompts, max_new_tokens, plan)))
        parts = draft_parts(self.target, self.draft)   # (embedding, head): a draft or target rebound runs with its own
        def made():
            target, draft = (self._layouts(m) for m in (self.target, self.draft))
            need = sum(pool_bytes(layouts, *key, dtype) for layouts, dtype in (target, draft))
            check_room(need, torch.device(self.device), *key, what=what)   # before torch is asked for it
            graphs = graphs_enabled(self.spec.decoding.graphs, self.device)
            return (runners.TargetRunner(self.target, self._pool(*target, *key), self.draft.taps, graphs),
                    runners.DraftRunner(self.draft, self._pool(*draft, *key), *parts))

        # an evicted target runner's steps hold it: cleared, it is freed now, not at the next cyclic collection;
        # runners used again keep their pools' contents, which engine.prefill empties
        drop = lambda pair: pair[0].steps.clear()   # noqa: E731
        modules = (self.target, self.draft, *parts)
        for shape, pair in list(self._runners_cache.items()):   # a target or draft rebound (model.draft = other):
            if any(a is not b for a, b in zip((pair[0].model, pair[1].model, pair[1].embed, pair[1].head), modules)):
                drop(self._runners_cache.pop(shape))   # every shape's runners of the old ones go, with their pools
        return runners.lru_get(self._runners_cache, key, 4, made, drop)

    def _settings(self, max_new_tokens, temperature, top_p, top_k, seed, stop) -> engine.Settings:
        # the arguments were checked by check_call (decoding/arguments.py) before this is reached
        gen = None
        if temperature > 0:
            gen = torch.Generator("cpu")
            if seed is None:
                gen.seed()               # a fresh seed for this generator only; torch's global one is untouched
            else:
                gen.manual_seed(int(seed))   # any Integral passes the checks; torch takes only an int
        stops = self.stop_ids if stop is None else frozenset(stop)
        # floats: an int temperature past int64 (2**64, checked finite and at most float32's max) would overflow as
        # the scalar dividing the logits
        return engine.Settings(max_new_tokens, float(temperature), float(top_p), top_k, frozenset(stops), gen)

    def _outputs(self, seqs, stats, single):
        outs = [Output(q.out, self._decode(q.out), stats) for q in seqs]
        return outs[0] if single else outs

    def _decode(self, ids: list[int]) -> str | None:
        return None if self.tokenizer is None else self.tokenizer.decode(ids, skip_special_tokens=True)
