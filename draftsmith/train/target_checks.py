"""The target side of a training job's checks (:mod:`draftsmith.train.preflight`): the device, the target folder,
its tokenizer, context and files, and what a draft given in its place is told."""
from __future__ import annotations

from pathlib import Path

from draftsmith import hub
from draftsmith.assembler.assemble import TOKENIZER_FILES
from draftsmith.assembler.checkpoint import list_tensors
from draftsmith.assembler.config import read_config, read_raw_config
from draftsmith.assembler.detect import draft_in
from draftsmith.chat import SOURCES, has_chat_template
from draftsmith.errors import DraftsmithError, OptionError, short_text
from draftsmith.options import check_device
from draftsmith.values import is_int


def device_problems(device) -> list[tuple[str, str]]:
    """``device`` refused by this machine, said under the field (the command line: --device)."""
    try:
        check_device(device)
    except OptionError as e:   # its text starts "device ..."
        return [("device", str(e).removeprefix("device "))]
    return []


def target_problems(job) -> list[tuple[str, str]]:
    """A target folder: its config.json, a tokenizer (the data is read with it) and, when training, a context
    (max_position_embeddings) that holds a window of job.seq tokens. A cached name is checked once fetched (the
    command line fetches it, then :func:`draftsmith.train.run` runs preflight again on its folder)."""
    if hub.is_named(job.target):
        return []
    t, name = Path(job.target), f"folder {short_text(job.target, 300)}"
    if not t.is_dir():
        return [("target", f"{name} {'is not a folder' if t.exists() else 'does not exist'}")]
    if not (t / "config.json").is_file():
        return [("target", f"{name} has no config.json (not a Hugging Face model folder)")]
    found = []
    if not any((t / f).is_file() for f in TOKENIZER_FILES):
        found.append(("target", f"{name} has no tokenizer ({', '.join(TOKENIZER_FILES[:-1])} or "
                                f"{TOKENIZER_FILES[-1]}), which reads the data{draft_hint(t)}"))
    elif job.chat:
        try:
            if not has_chat_template(t):
                found.append(("chat", f"{name}'s tokenizer has no chat template ({SOURCES}), which --chat renders "
                                      "the chat records with: drop --chat"))
        except DraftsmithError as e:   # a malformed chat_template.json, read as the tokenizer has no template
            found.append(("chat", f"--chat: {e}"))
    try:
        cfg = read_config(t)
    except DraftsmithError as e:
        return [*found, ("target", f"{name}: {e}")]
    context, original, file = cfg.get("max_position_embeddings"), longrope_original(cfg), short_text(cfg.file, 300)
    if is_int(original) and not (is_int(context) and context <= original):
        # past it transformers (and vLLM, SGLang) rotate with the long factors: features draftsmith's short-factor
        # target computes there are no engine's (generate() refuses such a call as well)
        found += context_problems(job, original, f"its longrope original_max_position_embeddings in {file}: past "
                                                 "it transformers rotates with the long factors, which draftsmith "
                                                 "does not compute", "positions")
    elif is_int(context):
        found += context_problems(job, context, f"max_position_embeddings in {file}")
    return found


def longrope_original(cfg) -> int | None:
    """A longrope config's original_max_position_embeddings as transformers reads it (in rope_parameters, or in
    rope_scaling as Phi-3's config.json writes it, else at the top level), or None for any other rope."""
    rope = cfg.get("rope_parameters") or cfg.get("rope_scaling")
    if not hasattr(rope, "get") or (rope.get("rope_type") or rope.get("type")) != "longrope":
        return None
    found = rope.get("original_max_position_embeddings", cfg.get("original_max_position_embeddings"))
    return found if is_int(found) else None


def target_plan_problems(job) -> list[tuple[str, str]]:
    """A target folder's files against the model its config builds, as the run's load plans them (tensor names,
    shapes and dtypes from the files' headers; no tensor data read but a tied head's two): a tensor missing or a
    file cut short was refused by that load only once the whole --data had been read and tokenized. Run once every
    other check passed (its first call imports transformers, ~2 s: a run refused for a mistyped option is refused
    at once); a cached name is planned once fetched."""
    if hub.is_named(job.target):
        return []
    from draftsmith.assembler.assemble import check_tied_head, plan_target
    from draftsmith.assembler.explain import explained, quiet_notes, swapped_note
    from draftsmith.components.backends import eager
    from draftsmith.registry import PluginError, default_registry

    folder, registry = Path(job.target), default_registry()
    try:   # its load notes unsaid (the run's own load says them); a draft given as the target is said so
        with quiet_notes(), explained(swapped_note(registry, folder, "target")):
            check_tied_head(plan_target(folder, registry, eager)[0])
    except PluginError:   # an installed plugin's, said by the spec's check: not the folder's fault
        return []
    except DraftsmithError as e:
        notes = "".join(f"\n{n}" for n in getattr(e, "__notes__", ()))
        return [("target", f"folder {short_text(folder, 300)} does not load as a target: {e}{notes}")]
    return []


def context_problems(job, context: int, where: str, what: str = "context") -> list[tuple[str, str]]:
    """What would run past the target's context (``what``: or the positions it is computed as transformers' for,
    a longrope target's): a window of --seq tokens, a self-distilled continuation of a seq // 4-token prompt, a
    held-out prompt and its new tokens (the last new token is never fed, as generate() counts). Each was refused
    only when it ran, after the data was read and the draft built, and under another name (generate_baseline()'s
    max_new_tokens), or (a window) not at all."""
    found, of = [], f"the target's {what}"
    if not job.eval_only and job.seq > context:
        found.append(("seq", f"{job.seq}: allowed an integer up to {context}, {of} ({where})"))
    elif not job.eval_only and job.self_distill and job.seq // 4 + job.self_distill - 1 > context:
        found.append(("self_distill", f"{job.self_distill}: allowed up to {context - job.seq // 4 + 1} with --seq "
                                      f"{job.seq}: its {job.seq // 4}-token prompts and the new tokens (the last one "
                                      f"never fed) fit {of} of {context} ({where})"))
    if job.held_out and job.eval_prompts and job.eval_prompt_tokens + job.eval_new_tokens - 1 > context:
        found.append(("eval_prompts", f"{job.eval_prompts}: held-out prompts of {job.eval_prompt_tokens} tokens and "
                                      f"{job.eval_new_tokens} new tokens each (the last one never fed) run past "
                                      f"{of} of {context} ({where}): give 0 to measure no held-out acceptance"))
    return found


def draft_hint(folder: Path) -> str:
    """'; it holds a draft (spec eagle3-llama), ...' for a folder that is no whole model and that a layout
    detector recognises (detect.draft_in, as assemble's note on swapped folders), else ''."""
    spec = detected_draft(folder)
    return (f"; it holds a draft (spec {spec}), not a target: give the target folder the draft is for as "
            "--target") if spec else ""


def detected_draft(folder: Path) -> str | None:
    """The spec a layout detector recognises ``folder`` as a draft of (detect.draft_in: no whole model), or None
    (an unreadable folder too: what reads it says why)."""
    from draftsmith.registry import default_registry

    try:
        match = draft_in(default_registry(), read_raw_config(folder), list(list_tensors(folder)))
    except DraftsmithError:
        return None
    return match.spec if match else None
