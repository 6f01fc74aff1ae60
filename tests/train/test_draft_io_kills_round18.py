"""draft_io (round 18 mutation run): init_draft's default seed is 0, the seed TrainConfig defaults to, so a Python
caller that leaves it out gets the start a default `draftsmith train` run makes."""
import torch

from draftsmith.train.draft_io import init_draft
from draftsmith.train.loop import TrainConfig

KEPT = torch.arange(0, 258, 3)


def test_init_draft_without_a_seed_starts_as_seed_0_the_trainers_default(tiny, tmp_path):
    assert TrainConfig().seed == 0
    default = init_draft("eagle3-llama", tiny / "target", tmp_path / "a", KEPT).draft.state_dict()
    zero = init_draft("eagle3-llama", tiny / "target", tmp_path / "b", KEPT, seed=0).draft.state_dict()
    assert all(torch.equal(default[k], zero[k]) for k in zero)


def test_start_from_target_skips_a_draft_weight_with_no_namesake_or_a_shape_it_cannot_take():
    """A draft layer weight takes its namesake in the target's last layer only where the rows match and its columns
    are a multiple of the target's; the others (no namesake, other rows, columns not a multiple) keep their start."""
    from types import SimpleNamespace

    from torch import nn

    from draftsmith.train.draft_io import start_from_target

    last = nn.Module()
    last.q_proj, last.o_proj, last.down_proj = nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 4)
    layer = nn.Module()
    layer.q_proj = nn.Linear(8, 4, bias=False)      # [embedding; hidden]: the target's fills the hidden half
    layer.o_proj = nn.Linear(6, 4, bias=False)      # 6 columns: not a multiple of the target's 4
    layer.down_proj = nn.Linear(4, 3, bias=False)   # 3 rows, the target's 4
    layer.extra = nn.Linear(4, 4, bias=False)       # no namesake in the target
    draft = nn.Module()
    draft.layers = nn.ModuleList([layer])
    draft.fc = nn.Linear(8, 4, bias=False)
    draft.fc.target_width = 8                       # not square: no identity added
    target = SimpleNamespace(model=SimpleNamespace(layers=[last]))
    before = {k: v.clone() for k, v in draft.state_dict().items()}
    done, _ = start_from_target(SimpleNamespace(target=target, draft=draft))
    assert done == ["layers.0.q_proj.weight"]
    assert torch.equal(layer.q_proj.weight[:, 4:], last.q_proj.weight)
    assert torch.equal(layer.q_proj.weight[:, :4], before["layers.0.q_proj.weight"][:, :4])
    for name in ("layers.0.o_proj.weight", "layers.0.down_proj.weight", "layers.0.extra.weight", "fc.weight"):
        assert torch.equal(draft.state_dict()[name], before[name]), name
