"""Size limits, checked before anything is parsed further, built on the meta device or allocated.

Each bound is far above any real draft, target or spec (the largest public targets have about 130 layers and
262k-token vocabularies; EAGLE trees have about 60 nodes), and low enough that a hostile or mistyped value is
refused in well under a second instead of building for minutes or allocating gigabytes. Errors name the limit.
"""
from __future__ import annotations

# Spec files (YAML)
SPEC_BYTES = 64 * 1024          # a spec file; real ones are 1-3 KB
YAML_DEPTH = 32                 # nesting of mappings and lists, aliases expanded
YAML_NODES = 20_000             # nodes of the document with every alias expanded (an alias bomb is refused)
NAME_CHARS = 100                # a spec's name
DESCRIPTION_CHARS = 2_000       # a spec's description
EXTENDS_CHARS = 1_000           # a spec's extends: (a spec name or a .yaml path)
EXTENDS_DEPTH = 8               # bases in one chain of extends: (a spec, its base, the base's base, ...)
INT_DIGITS = 100                # an integer in a spec or a call (Python will not even print one past 4300
                                # digits, so a longer one ends in a clear error, not in json or an f-string)

# Checkpoint folders
JSON_BYTES = 16 * 1024 * 1024   # config.json, generation_config.json, a shard index
JSON_DEPTH = 64                 # nesting inside those JSON files
DRAFT_LAYERS = 64               # decoder layers of a draft (num_layers, or layers.N. tensor names)
TARGET_LAYERS = 1_024           # num_hidden_layers of a target config
WIDTH = 1 << 20                 # hidden_size, intermediate_size, head_dim
HEADS = 4_096                   # attention / key-value heads
VOCAB = 1 << 23                 # vocabulary sizes (8M tokens)
TENSORS = 1 << 20               # tensors listed in one checkpoint (the largest MoE targets have ~10^5)
TENSOR_NAME_CHARS = 1_024       # one tensor name (real ones are under ~300 characters)

# Decoding
TOPK = 64                       # tree branching
STEPS = 64                      # draft depth
DRAFT_TOKENS = 1_024            # tree size including the root
PAGE_SIZE = 4_096               # KV pool page size (tokens)
NEW_TOKENS = 1 << 20            # max_new_tokens (KV pools are sized for prompt + max_new_tokens up front)
BATCH = 4_096                   # prompts in one generate() call (each is a row of the KV pools, allocated up front)
MESSAGES = 1 << 16              # messages of one conversation prompt, counted before any is read (its tokens are
                                # checked against the context once rendered)
MESSAGE_VALUES = 1 << 17        # values in a conversation's messages as its template writes them, a part held
                                # twice counted twice (a tool call's arguments 40 levels of [x, x] deep: 2^40)
PROBE_BYTES = 1 << 20           # a `doctor --probe @FILE` file (a regular file; real probes are a few hundred bytes)
TRAIN_STEPS = 10**7             # `train --steps`: draft trainings run 10^4 to 10^6 steps, and 10^7 take twelve days at
                                # ten a second; past it a mistyped count stretches the warm-up (5% of the steps) past
                                # any run's end, so the draft would train at a learning rate near 0

# Weight-name rules (regular expressions over tensor names)
REGEX_CHARS = 1_000             # a pattern
REGEX_SECONDS = 0.1             # one match (the regex package overshoots about 2x); slower is refused, naming the rule
