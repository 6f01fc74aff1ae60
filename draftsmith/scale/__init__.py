"""The scale benchmark: draftsmith against the memory-bandwidth limit and transformers, on random weights in real
Llama-3.x shapes (``draftsmith bench --scale 1b,8b``, ``python benchmarks/bench_scale.py``).

For each shape it writes (once, under ``--checkpoints``, by default OUT/checkpoints) a random Llama target in the
Hugging Face layout and an EAGLE-3 draft in the ``midlayer.*`` layout with a reduced vocabulary, assembles them through
``assemble("eagle3-llama")`` and measures, side by side in one process, at batch 1 and 8:

* the bandwidth limit of target-only decoding: the bytes a decode step reads (every target weight once; an
  untied input embedding not at all, since a step reads one row of it) over the measured device copy bandwidth
  (read + write), as ms per step and tok/s;
* draftsmith target-only, a chain of 6 nodes and trees of 8 and 32 nodes (nodes count the root: the chain
  verifies the root and 5 drafted tokens, the trees the root and 7 or 31), each row with these ratios:

  - ``x target-only step`` = the method's ms per step / target-only's ms per step: whole steps (draft forwards,
    tree, verdict, compaction, catch-up and the host sync included) over whole decode steps;
  - ``verify fwd ms (x decode fwd)`` = one target forward over the method's tree (the verification forward,
    gathering the draft's taps) / one target forward over one token per row without the taps (the forward
    target-only decoding runs, ``hand_over=False``), measured once per batch in the same rounds as every
    verification and draft forward. Issue 10's "a tree verification step of 8 nodes <= 1.15x a target-only
    step" is read on this column: its own arithmetic (1.15 + 5 draft forwards x 0.06 = 1.45, tau 4 / 1.45 =
    2.76 >= 2.5) puts the draft forwards in a target of their own, so its 1.15x is the verification forward's;
    the whole step is the ``x target-only step`` column;
  - ``draft fwd ms (x target-only step)`` = one draft forward (one expansion, topk tokens per row) / target-only's
    ms per step (results.json also has it / the decode forward: ``draft_x_decode_forward``);
  - decode time outside forwards: the share of a run's wall time after the prefill spent outside model forwards
    (:attr:`~draftsmith.decoding.stats.Stats.decode_bookkeeping_share`), and in brackets the share its forwards
    spent on the KV pool's addressing and masks (inside the forwards, so not in the first figure); on CPU only,
    where host time is compute time;

* transformers ``generate`` with its dynamic cache (eager) and its static cache (which transformers compiles on
  CUDA: the row says ", compiled" when it did, and results.json has ``compiled``);
* tokens/s projected at tau = 3, 4, 6 from the measured step costs (B * tau / step) for the speculative rows
  ("-" on the others, whose tok/s is measured); past a method's deepest acceptance (steps + 1) nothing is
  projected, and at exactly that the figure is marked (max): a ceiling.

A step's cost is (time of N new tokens - time of 1 new token) / the N-token run's steps, so prefill drops out;
the runs of 1 and N tokens of every method take turns (after one untimed run each), the step cost is the median
over rounds of that round's difference, and the raw times are kept. (A 1-token run skips the draft's prefill
forward, which is thus spread over the N-token run's steps: < 0.1% of a step at 1B and 8B with 128 new tokens.)
Single forwards are timed back to back (20 per turn), on CUDA as replays of their CUDA graph timed with events,
not one at a time by the host clock, whose round trip is 5-10% of an 8B draft forward. Random drafts accept
~nothing, which is why speculative speed is projected from step costs rather than measured.

Writes results.json (the per-round samples, the versions, device, threads and graphs setting included),
results.md (after each phase of each batch, so a run cut off by a time limit keeps what it measured) and one PNG
per shape (tokens/s against tau) under ``--out``: a new or empty folder, or one a previous run wrote (it holds
results.json, written first; the shapes it holds that this run does not measure stay in results.json and
results.md); a folder holding anything else, or a path that cannot be a folder, is refused before any work, as is
a ``--checkpoints`` path that cannot be one.

Its modules: ``checkpoints`` writes the random pairs (``SHAPES``), ``timing`` times (turns, single forwards, copy
bandwidth, the bytes a step reads), ``report`` renders results.md and the PNGs, ``run`` measures a shape and writes
a run (its ``run_scale`` is what ``draftsmith bench --scale`` calls); :mod:`draftsmith.bench_out` checks the
``--out`` and ``--checkpoints`` folders.
"""
