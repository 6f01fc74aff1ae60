"""Mutation survivors of decoding/kvpool.py: compact_rows's shape check on a buffer without a batch dimension.

The other survivors are equivalent: sequence ids are opaque handles (``_next_id`` starting at 1, or stepping by
2 or -1, still hands out distinct ids that every method takes back unchanged)."""
import pytest
import torch

from draftsmith.decoding.kvpool import compact_rows


def test_a_flat_buffer_under_a_batched_select_is_refused_by_its_shapes():
    # catches kvpool.py:48 buf.dim() < 2 -> buf.dim() < 1
    # (a 2-D select makes the call batched, so buf needs [B, T, ...]; a 1-D buf whose length happens to equal B
    # slipped past the check and failed later unpacking buf.shape[:2], an error that names neither shape)
    buf, select = torch.arange(2.0), torch.zeros(2, 1, dtype=torch.long)
    with pytest.raises(ValueError, match=r"select \(2, 1\) does not fit buf \(2,\)"):
        compact_rows(buf, 0, select)
    assert torch.equal(buf, torch.arange(2.0))
    # the same rows with the batch dimension spelled out are accepted
    assert compact_rows(buf.view(2, 1), 0, select).tolist() == [[0.0], [1.0]]
