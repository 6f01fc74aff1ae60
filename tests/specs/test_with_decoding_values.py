"""with_decoding() reads its values as a spec file's are (a hunt of the Python API: ``graphs=True`` was kept as the
bool, which the graph and fusion checks compare with strings, so on a GPU it ran as off; numpy's int64 topk was
refused at assemble() though generate(topk=np.int64(2)) takes it); a value the checks refuse is kept for them."""
import numpy as np
import pytest
import torch

import draftsmith
from draftsmith.decoding.graphs import graphs_enabled
from draftsmith.errors import OptionError, SpecError


def test_graphs_true_is_on():
    spec = draftsmith.load_spec("demo").with_decoding(graphs=True)
    assert spec.decoding.graphs == "on"
    assert draftsmith.load_spec("demo").with_decoding(graphs=False).decoding.graphs == "off"
    if not torch.cuda.is_available():
        with pytest.raises(OptionError, match="decoding.graphs: on needs a CUDA device"):
            draftsmith.assemble(spec)
    assert graphs_enabled(spec.decoding.graphs, "cuda")   # what a GPU then runs (True read as off before)


def test_a_numpy_integer_is_an_int():
    spec = draftsmith.load_spec("demo").with_decoding(topk=np.int64(2), steps=np.uint8(3))
    assert (spec.decoding.topk, spec.decoding.steps) == (2, 3) and type(spec.decoding.topk) is int
    assert draftsmith.assemble(spec).spec.decoding.topk == 2


@pytest.mark.parametrize("changes, said", [({"topk": 0}, "decoding.topk: 0 is not allowed"),
                                           ({"topk": 2.0}, "decoding.topk: 2.0 is not allowed"),
                                           ({"mode": "v9"}, "decoding.mode: 'v9' is not allowed")])
def test_a_refused_value_is_kept_for_assemble_to_say(changes, said):
    spec = draftsmith.load_spec("demo").with_decoding(**changes)
    assert getattr(spec.decoding, next(iter(changes))) == next(iter(changes.values()))
    with pytest.raises(SpecError, match=said):
        draftsmith.assemble(spec)
