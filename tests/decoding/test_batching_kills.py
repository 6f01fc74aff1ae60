"""Mutation survivors of decoding/batching.py: a KVBatch's write/read/mask/pos checked against hand-built ones."""
import torch

from draftsmith.decoding.batching import causal_batch, kv_batch, pad_tokens
from test_batching import _pool   # page_size 1, low pages first: committed positions take slots 0, 1, ... in order


def test_decode_beside_a_prefill_writes_reads_masks_and_places_each_row():
    # catches batching.py:25 -1 -> 1/-2/0, :28 >= 0 -> > 0 / >= 1, :35 < -> <=, :37 & -> | and < -> <=,
    # :41 mask[..., 0] -> [..., 1], :42 + -> - and padding pos 0 -> 1, :52 padding row -1 -> 0 / 1
    pool, seqs = _pool([3, 0])   # seq 0: slots 0-2 committed; decodes 1 (slot 3). seq 1: prefill of 3 (slots 4-6)
    kv, pos = causal_batch(pool, seqs, [1, 3], "cpu")
    assert kv.write.tolist() == [[3, -1, -1], [4, 5, 6]]
    assert kv.read.tolist() == [[0, 1, 2, 3], [4, 5, 6, 4]]   # seq 1's padding key reads its own position 0
    assert kv.mask.tolist() == [[[[1, 1, 1, 1], [1, 0, 0, 0], [1, 0, 0, 0]]],
                                [[[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0]]]]
    assert pos.tolist() == [[3, 0, 0], [0, 1, 2]]


def test_a_row_that_skips_the_first_pending_key():
    # catches batching.py:40 key < lens -> <=, :38 rel_mask.shape[-1] -> shape[1] / shape[-2]
    # (a growing draft tree: 3 pending, only pending 2 is new and its ancestors are pending 1, not pending 0)
    pool, seqs = _pool([2])
    kv, pos = kv_batch(pool, seqs, [3], torch.tensor([[2]]), torch.tensor([[[False, True, True]]]),
                       torch.tensor([[2]]), "cpu")
    assert kv.write.tolist() == [[4]] and kv.read.tolist() == [[0, 1, 2, 3, 4]]
    assert kv.mask.tolist() == [[[[1, 1, 0, 1, 1]]]]
    assert pos.tolist() == [[4]]


def test_pad_tokens_right_pads_with_zero_by_default():
    # catches batching.py:57 fill=0 -> 1, :59 + -> -, * -> //, T - len -> T + len
    assert pad_tokens([[5], [1, 2, 3]]).tolist() == [[5, 0, 0], [1, 2, 3]]
    assert pad_tokens([[5], [1, 2]], fill=9).tolist() == [[5, 9], [1, 2]]
