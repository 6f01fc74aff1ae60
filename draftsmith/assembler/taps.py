"""EAGLE-3 tap layers (kept here for callers of the assembler; the resolution lives with the fusion component in
:mod:`draftsmith.components.eagle3_config`)."""
from draftsmith.components.eagle3_config import (KEY, aux_count, config_ids, default_taps, explicit_ids,
                                                 resolve_eagle3, resolve_taps)

__all__ = ["KEY", "aux_count", "config_ids", "default_taps", "explicit_ids", "resolve_eagle3", "resolve_taps"]
