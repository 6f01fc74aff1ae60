"""The spec schema (phase 1: shape and types). Every model forbids unknown keys and is frozen.

Component choices are ``{kind: <registered name>, ...params}``; the params are checked in phase 2 against the
component's own ``Params`` model (:mod:`draftsmith.specs.resolve`), so this file never lists component names.
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr, ValidationError
from pydantic_core import PydanticCustomError

from draftsmith import limits
from draftsmith.errors import Problem, SpecError, short, spec_file_text, with_places
from draftsmith.hooks.records import SPEC_NAME
from draftsmith.values import scalar
from draftsmith.yaml_places import yaml_places

M = TypeVar("M", bound=BaseModel)


def validate_strict(model: type[M], data: Any) -> M:
    """Validate plain data (from YAML or a call) with no coercion: ``"5"`` is not 5, ``8.0`` is not 8, ``"yes"``
    and ``1`` are not true. pydantic's strict JSON mode, so a list is accepted where a tuple is declared. Both the
    spec models and every component's ``Params`` are validated here (phase 1 and phase 2), so strictness has one
    home and a plugin's params get it without declaring anything."""
    try:
        text = json.dumps(data, allow_nan=True, default=_not_json)
    except ValueError:   # an integer Python will not print (past 4300 digits): validated as its description
        text = json.dumps(_printable(data, set()), allow_nan=True, default=_not_json)
    return model.model_validate_json(text, strict=True)


_INT_BOUND = 10 ** limits.INT_DIGITS


def too_many_digits(x: Any) -> bool:
    """An integer of more than ``limits.INT_DIGITS`` digits: refused in a spec (Python will not even print one
    past 4300 digits, which json and every message need)."""
    return isinstance(x, int) and not -_INT_BOUND < x < _INT_BOUND


def _printable(x: Any, active: set[int]) -> Any:
    # data with every integer past limits.INT_DIGITS as a string describing it (a wrong type wherever it lands)
    if too_many_digits(x):
        return short(x)
    if not isinstance(x, (dict, list, tuple)):
        return x
    if id(x) in active:
        return "<the value contains itself>"
    active.add(id(x))
    out = ({_printable(k, active) if isinstance(k, int) else k: _printable(v, active) for k, v in x.items()}
           if isinstance(x, dict) else [_printable(v, active) for v in x])
    active.discard(id(x))
    return out


NOT_PLAIN = "<not plain data>"


def _not_json(value: Any) -> Any:
    if isinstance(value, (set, frozenset)):
        return list(value)
    return {NOT_PLAIN: type(value).__name__}  # fits no declared type: reported as a wrong type


def is_stand_in(value: Any) -> bool:
    """Whether ``value`` is what :func:`validate_strict` validates in place of a value that is not plain data."""
    return isinstance(value, dict) and len(value) == 1 and NOT_PLAIN in value


class Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Ref(BaseModel):
    """A component reference: ``kind`` names a registered component; other keys are its params."""

    model_config = ConfigDict(extra="allow", frozen=True)
    kind: str

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class Norms(Frozen):
    input: Literal["all", "not_first", "none"] = "all"   # input_layernorm slots filled in which layers
    # the first layer's hidden_norm slot (on the hidden state beside the embedding): auto = filled when the
    # fusion reads one there (eagle3), true = must be filled, false = an identity
    hidden: Literal["auto", True, False] = "auto"
    final: bool = True                                   # final norm before the head


class Vocab(Frozen):
    # auto: reduced when the checkpoint has d2t or its draft_vocab_size is below the target's vocabulary
    reduced: Literal["auto", True, False] = "auto"
    # offset: target_id = draft_id + d2t[draft_id] (the published convention); absolute: d2t holds target ids
    d2t: Literal["offset", "absolute"] = "offset"


class Share(Frozen):
    embed: Literal["target", "own", "own_if_different"] = "target"
    lm_head: Literal["target", "draft"] = "target"


class Draft(Frozen):
    # auto: the layer count comes from the tensor names, never from the config's num_hidden_layers
    num_layers: Annotated[int, Field(ge=1, le=limits.DRAFT_LAYERS)] | Literal["auto"] = "auto"
    layer: Ref = Ref(kind="llama")
    attention: Ref = Ref(kind="auto")                    # auto: mla when the config has MLA fields, else gqa
    mlp: Ref = Ref(kind="swiglu")
    # as_target: layer i continues the target's stack at its index num_hidden_layers + i (an MTP layer): its MLP is
    # the target type's mixture of experts where the target's config makes that index one, else draft.mlp
    moe: Literal["none", "as_target"] = "none"
    norm: Ref = Ref(kind="rms")
    norms: Norms = Norms()
    fusion: Ref
    # hidden state fed to the next draft step; post-norm also when the fusion's norm_output resolves to feed_back
    # (an EAGLE 3.1 config upgrades pre_norm), which needs norms.final: true
    feed_back: Literal["pre_norm", "post_norm"] = "pre_norm"
    vocab: Vocab = Vocab()
    share: Share = Share()


class Rule(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)
    kind: str = "regex"


def rule_keys() -> list[str]:
    """Every key a built-in rule kind is written with, ``kind`` first, each once."""
    from draftsmith.components.split_rule import RULE_KEYS

    return list(dict.fromkeys(["kind", *(k for ks in RULE_KEYS.values() for k in ks)]))


def rule_forms() -> str:
    """The keys each built-in rule kind is written with, in a spec author's words (regex when ``kind`` is left out)."""
    from draftsmith.components.split_rule import RULE_KEYS

    default = Rule.model_fields["kind"].default
    keys = rule_keys()
    forms = "; ".join(f"{{{'' if kind == default else f'kind: {kind}, '}{', '.join(ks)}}}"
                      f"{f' (kind: {kind}, the default)' if kind == default else ''}" for kind, ks in RULE_KEYS.items())
    return f"a list, each item a mapping with keys {', '.join(keys)}: {forms}"


def _flow(v: Any) -> str:
    """``v`` in YAML's flow style, strings single-quoted (as the README asks of regexes)."""
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    if isinstance(v, (list, tuple)):
        return f"[{', '.join(map(_flow, v))}]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_flow(x)}" for k, x in v.items()) + "}"
    return str(v).lower() if isinstance(v, bool) else str(v)


def _rules_list(value: Any) -> Any:
    """``weights.rules`` is a list: a mapping (``{midlayer: layers.0}``, an old-name -> new-name table) or a single
    value is refused naming every rule key; for one rule written without its list, that rule in a list, and for a
    table of strings the rules it meant."""
    if isinstance(value, (list, tuple)):
        return tuple(value)   # as a tuple: a list is a tuple only in JSON, and this value is Python's now
    meant = ""
    if isinstance(value, dict) and value and set(value) <= set(rule_keys()):
        meant = f"; for this one rule, in a list: rules: [{_flow(value)}]"
    elif isinstance(value, dict) and value and all(isinstance(k, str) and isinstance(v, str)
                                                   for k, v in value.items()):
        import re

        first = [f"{{match: '^{re.escape(k)}', replace: '{v}'}}" for k, v in list(value.items())[:3]]
        meant = f"; for this table: rules: [{', '.join(first)}{', ...' if len(value) > 3 else ''}]"
    # an error type of its own: the problem reads "<value> is not allowed", with this message (less "Input should
    # be") as what is allowed (specs/translate.py)
    raise PydanticCustomError("rules_list", "Input should be {forms}{meant}", {"forms": rule_forms(), "meant": meant})


class Weights(Frozen):
    rules: Annotated[tuple[Rule, ...], BeforeValidator(_rules_list)] = ()
    ignore: tuple[str, ...] = ()


class Quant(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)
    method: str = "none"


def on_off(value: Any) -> Any:
    """``true`` / ``false`` as ``on`` / ``off``: what YAML makes of the words written unquoted."""
    return ("on" if value else "off") if isinstance(value, bool) else value


GraphsSetting = Literal["auto", "on", "off", "compile"]   # decoding.graphs (and bench's --graphs)
CUDA_ONLY_GRAPHS = ("on", "compile")   # the settings a load without CUDA refuses (decoding.graphs.graphs_enabled)


class Decoding(Frozen):
    topk: int = Field(4, ge=1, le=limits.TOPK)           # bounds: draftsmith/limits.py
    steps: int = Field(5, ge=1, le=limits.STEPS)
    draft_tokens: int = Field(8, ge=2, le=limits.DRAFT_TOKENS)
    page_size: int = Field(1, ge=1, le=limits.PAGE_SIZE)
    mode: Literal["auto", "v1", "v2"] = "auto"
    attention: str = "auto"                              # registered attn_backend (auto: sdpa on CPU)
    # CUDA graphs + fused kernels (auto, compile: on CUDA); YAML 1.1 reads an unquoted on / off as true / false
    graphs: Annotated[GraphsSetting, BeforeValidator(on_off)] = "auto"
    # CPU matmuls on oneDNN-prepacked weights: auto = the large ones, packed = all, plain = none. CUDA: auto times
    # cuBLAS against inductor's reduction for each one-row product no wider than deep (components/gemv.py) and
    # keeps the faster; packed / plain keep cuBLAS
    linear: Literal["auto", "packed", "plain"] = "auto"
    # the draft's weights, activations and KV (same: assemble()'s dtype). The draft only proposes, so its precision
    # moves acceptance, never the output: a float32 target with a bfloat16 draft stays lossless
    draft_dtype: Literal["same", "float32", "bfloat16", "float16"] = "same"


Folder = Annotated[str, Field(min_length=1)]   # '' would resolve to the spec's own folder


class Checkpoints(Frozen):
    target: Folder | None = None                         # relative paths resolve against the spec file
    draft: Folder | None = None


COPIED = "(its decoding section as with_decoding() left it)"   # a spec's label where its file does not say it


class Spec(Frozen):
    name: str = Field(pattern=SPEC_NAME, max_length=limits.NAME_CHARS)
    description: str = Field("", max_length=limits.DESCRIPTION_CHARS)
    # the spec this one changes (a spec name, or a .yaml path relative to this file): merged in by the loader
    # (draftsmith.specs.extends); the merged spec is what is kept, so it is not dumped
    extends: str | None = Field(None, min_length=1, max_length=limits.EXTENDS_CHARS, exclude=True)
    checkpoints: Checkpoints = Checkpoints()
    draft: Draft
    weights: Weights = Weights()
    quant: Quant = Quant()
    decoding: Decoding = Decoding()
    _source: str | None = PrivateAttr(None)              # the file it came from (set by the loader)
    _replaced: frozenset = PrivateAttr(frozenset())      # the decoding fields with_decoding() set: not the file's
    # where a problem in a value its ``extends:`` bases gave is said, and where they write a path (set by the loader:
    # a specs.extends.Inheritance, called as specs.extends.inherited, its places as specs.extends.base_places)
    _inherited: Any = PrivateAttr(None)

    @property
    def source(self) -> str:
        return self._source or f"<spec {self.name}>"

    @property
    def summary(self) -> str:
        """Its description, and the spec it extends (`draftsmith list`'s and generate's line)."""
        return " ".join(filter(None, [self.description, self.extends and f"(extends {self.extends})"]))

    def error(self, problems: Iterable[Problem], kind: type[SpecError] = SpecError) -> SpecError:
        """A ``kind`` of SpecError of this spec with ``problems`` found after it loaded (against its checkpoints, its
        machine), each said where the spec's text says its value: at the spec file's line, or, for a value an
        ``extends:`` base gave, at its ``extends`` line naming the base's file and line; one in a value with_decoding()
        set at no line (its file does not say it), the error's source then labelled ``COPIED``."""
        problems = list(problems)
        replaced = [p.path.startswith("decoding.") and p.path.removeprefix("decoding.") in self._replaced
                    for p in problems]
        copied = [p for p, r in zip(problems, replaced) if r]
        own = [p for p, r in zip(problems, replaced) if not r]
        own = self._inherited(own) if self._inherited else own
        if not copied:
            return kind(self.source, own)
        if (text := spec_file_text(self.source)) is not None:   # the file's own values at its lines, the copied at none
            own = with_places(own, yaml_places(text))
        return kind(f"{self.source} {COPIED}", own + copied)

    def places(self, paths: Iterable[str]) -> dict[str, str]:
        """Where this spec's text writes each dotted path, as :meth:`error` places a problem there: 'line N' of its
        file (an alias's note after it), or for a value an ``extends:`` base gave, its extends line and the base's
        file and line; a path no file says is left out (a spec given as data)."""
        paths = [p for p in paths if not (p.startswith("decoding.") and p.removeprefix("decoding.") in self._replaced)]
        based = self._inherited.places(paths) if self._inherited else {}   # copied values: no line (as error's)
        own = yaml_places(text) if (text := spec_file_text(self.source)) is not None else None
        out = {}
        for path in paths:
            at, note = based.get(path, (None, ""))
            if at is None and own is not None:   # its own value (or a base's, where its text says no extends line)
                at, alias = own.place(path, False)
                note = "; ".join(filter(None, (note, alias)))
            if at is not None:
                out[path] = f"line {at[0]}" + (f"; {note}" if note else "")
        return out

    def with_decoding(self, **changes: Any) -> Spec:
        """This spec with some ``decoding`` fields replaced (e.g. ``attention="flex"``); it keeps its source file,
        so relative checkpoint paths still resolve. The section is checked when the spec is assembled, as a spec
        file's is (fields, types, bounds, cross-field rules, backend names: a SpecError naming
        ``decoding.<field>``, specs.resolve.decoding_section_problems). Values are read as a file's are
        (``graphs=True`` is on, as YAML's ``graphs: on``; numpy's integers are ints, a 0-d tensor its number); one
        those checks refuse is kept as given, for them to say."""
        changes = {k: scalar(v) for k, v in changes.items()}
        decoding = self.decoding.model_copy(update=changes)
        try:
            decoding = validate_strict(Decoding, dict(decoding))
        except ValidationError:
            pass
        out = self.model_copy(update={"decoding": decoding})
        out._replaced = self._replaced | set(changes)
        return out
