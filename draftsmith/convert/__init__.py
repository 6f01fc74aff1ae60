"""Checkpoint layouts as data, and conversion between them (``draftsmith convert``).

A layout is a file naming (the weight rules of a built-in spec, inverted), a config style (which file, which keys,
what nests where) and the rotary pair order its q/k rows are stored in. Conversion reads a checkpoint through the
rules of the spec ``inspect`` detects, into canonical names and config facts, and writes them out through the
target layout's rules and style. No code path is keyed on a family: every difference is a row of data.
"""
