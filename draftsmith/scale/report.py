"""The scale benchmark's report: results.md's tables (a table per shape and batch, :data:`COLUMNS`), their note and
a PNG per shape of tokens/s against tau."""
from __future__ import annotations

import io
from pathlib import Path

from draftsmith.bench_out import write_atomic

TAUS = (3.0, 4.0, 6.0)   # the acceptance lengths the speculative rows' tokens/s is projected at
# the heading's end for a shape a run measured only in part (cut off, or still going; run.run_scale)
PARTIAL_ENTRY = " (partial: as far as a run measured it before it was cut off, or while it goes on)"
COLUMNS = ("method", "ms / step", "x target-only step", "verify fwd ms (x decode fwd)",
           "draft fwd ms (x target-only step)", "decode time outside forwards (+ KV addressing, inside forwards)",
           "tok/s", *(f"tok/s @ tau {t:g}" for t in TAUS))


def _fmt(x, spec=".2f") -> str:
    return "-" if x is None else format(x, spec)


def _cells(name: str, m: dict) -> list[str]:
    if "error" in m:
        return [name, m["error"], *["-"] * (len(COLUMNS) - 2)]
    draft = (f"{m['draft_forward_ms']:.2f} ({m['draft_x_target_only']:.3f}x)" if "draft_forward_ms" in m else "-")
    verify = (f"{m['verify_forward_ms']:.2f} ({m['verify_x_decode_forward']:.2f}x)"
              if "verify_forward_ms" in m else "-")
    share = ("-" if m.get("bookkeeping_share") is None else
             f"{100 * m['bookkeeping_share']:.1f}% (+{100 * m['addressing_share']:.1f}%)")
    return [name, _fmt(m.get("step_ms")), _fmt(m.get("x_target_only")), verify, draft, share,
            _fmt(m.get("tok_s"), ".1f"), *(_projected(m, t) for t in TAUS)]


def markdown(results: list[dict]) -> str:
    lines = []
    for r in results:
        about = ", ".join(x for x in (
            r.get("device_name"), r.get("torch") and f"torch {r['torch']}",
            r.get("transformers") and f"transformers {r['transformers']}",
            r.get("threads") and f"{r['threads']} thread{'s' * (r['threads'] != 1)}",
            r.get("graphs") and f"graphs {r['graphs']} ({'on' if r.get('graphs_enabled') else 'off'})",
            r.get("repeats") and f"median of {r['repeats']} round{'s' * (r['repeats'] != 1)} after a warm-up")
            if x)
        lines += [(f"## {r['shape']} ({r.get('device')}, {r.get('dtype')}, prompt {r.get('prompt_len')}, "
                   f"{r.get('new_tokens')} new tokens; weights {r.get('weight_bytes', 0) / 1e9:.2f} GB, "
                   f"copy bandwidth {r.get('copy_bandwidth', 0) / 1e9:.0f} GB/s)"
                   + (PARTIAL_ENTRY if r.get("partial") else "")), ""]
        if about:
            lines += [about, ""]
        if r.get("products"):
            lines += ["One-row products chosen by measurement (`decoding.linear: auto`, components/gemv.py): "
                      + "; ".join(r["products"]), ""]
        lines += [NOTE, ""]
        for B, rows in r["batches"].items():
            decode = rows.get("draftsmith target-only", {}).get("decode_forward_ms")
            lines += [f"### batch {B}" + ("" if decode is None else
                                          f" (one-token decode forward {decode:.2f} ms: the x decode fwd unit)"), "",
                      "| " + " | ".join(COLUMNS) + " |", "|---" * len(COLUMNS) + "|"]
            lines += ["| " + " | ".join(_cells(name, m)) + " |" for name, m in rows.items()]
            lines.append("")
    return "\n".join(lines)


NOTE = ("Nodes count the root: chain 6 verifies the root and 5 drafted tokens, tree 8 the root and 7, tree 32 the "
        "root and 31. x target-only step: ms / step over the target-only ms / step (whole steps, draft forwards "
        "included). verify fwd: one target forward over the tree (taps gathered), x the one-token decode forward "
        "(taps not gathered, as target-only decoding runs it), both timed in the same rounds. draft fwd: one draft "
        "forward (one expansion), x the target-only ms / step. Decode time outside forwards: the share of a run's "
        "wall time after the prefill spent outside model forwards; in brackets the share spent on the KV pool's "
        "addressing and masks, which is inside the forwards (CPU only: on CUDA the host timers time launches).")


def _projected(m: dict, tau: float) -> str:
    """tok/s at ``tau`` for a speculative row; '-' for a row that does not speculate (its tok/s column says its
    speed) and past what the method's depth can accept (steps + 1); at exactly that, marked max (every draft
    token accepted: a ceiling, not a forecast)."""
    if f"tok_s_tau{tau:g}" not in m or tau > m["tau_max"]:
        return "-"
    return _fmt(m[f"tok_s_tau{tau:g}"], ".1f") + (" (max)" if tau == m["tau_max"] else "")


def plot(result: dict, path: Path) -> Path | None:
    """The shape's PNG of tokens/s against tau, written whole or not at all (a full disk names ``path``); None
    where matplotlib does not import (the optional extra: pip install 'draftsmith[bench]')."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception:  # noqa: BLE001 (not installed, or broken: an optional plot is no reason to fail a run)
        return None
    batches = list(result["batches"])
    fig, axes = plt.subplots(1, len(batches), figsize=(6 * len(batches), 4.5), squeeze=False)
    taus = [1.0 + 0.25 * i for i in range(25)]
    for ax, B in zip(axes[0], batches):
        for name, m in result["batches"][B].items():
            if "step_ms" in m and "x_target_only" in m:
                reach = [t for t in taus if t <= m.get("tau_max", taus[-1])]   # tau past the depth: not reachable
                ax.plot(reach, [B * t / (m["step_ms"] / 1e3) for t in reach], label=name)
            elif "tok_s" in m:
                ax.plot(taus, [m["tok_s"]] * len(taus), "--", label=name)
        ax.set(title=f"{result['shape']}, batch {B} ({result['device']}, {result['dtype']})",
               xlabel="tau (tokens per verification step)", ylabel="tokens / s")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=120)
    plt.close(fig)
    write_atomic(path, png.getvalue())
    return path
