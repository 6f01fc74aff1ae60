"""Mutation survivors of components/sliding.py: what mask the wrapped backend is handed, and how often it is built."""
import torch

from draftsmith.components.sliding import windowed


def _recording():
    seen = []

    def backend(q, k, v, mask, scale):
        seen.append(mask)
        return q
    return backend, seen


def _qkv(T, S):
    return torch.zeros(1, 1, T, 2), torch.zeros(1, 1, S, 2), torch.zeros(1, 1, S, 2)


def test_keys_that_fit_the_window_keep_the_causal_path_and_wider_ones_are_cut():
    # catches sliding.py:32 S <= window -> S < window (S == window would lose the mask-free causal kernel)
    backend, seen = _recording()
    attend = windowed(backend, 4)
    attend(*_qkv(2, 4), None, 1.0)
    assert seen == [None]
    attend(*_qkv(2, 5), None, 1.0)   # queries at positions 3 and 4: keys k with k <= p and p - k < 4
    assert seen[1].tolist() == [[[[True, True, True, True, False], [False, True, True, True, True]]]]


def test_a_padding_mask_is_kept_when_the_keys_fit_the_window():
    # catches sliding.py:32 mask is None -> mask is not None (a padded batch's mask was dropped for plain causal)
    backend, seen = _recording()
    mask = torch.tensor([[True, False, False], [True, False, False], [True, False, True]])[None, None]
    windowed(backend, 4)(*_qkv(3, 3), mask, 1.0)
    assert seen[0].tolist() == mask.tolist()


def test_the_window_is_built_once_for_the_layers_of_a_forward():
    # catches sliding.py:35 last[0] -> last[1] (both branches) and :38 last[0], last[1] = -> last[1], last[1] =
    backend, seen = _recording()
    attend = windowed(backend, 2)
    mask = torch.ones(1, 1, 3, 5, dtype=torch.bool).tril(2)
    for _ in range(2):
        attend(*_qkv(3, 5), mask, 1.0)   # two layers, one mask object
    for _ in range(2):
        attend(*_qkv(3, 5), None, 1.0)   # two layers, causal
    assert seen[0] is seen[1] and seen[2] is seen[3] and seen[1] is not seen[2]
    assert seen[0].tolist() == seen[2].tolist() == [[[[0, 1, 1, 0, 0], [0, 0, 1, 1, 0], [0, 0, 0, 1, 1]]]]
