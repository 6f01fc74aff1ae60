"""Module classes made at run time by putting a mixin in front of a module's own class (an ``nn.Linear`` whose
weight is prepacked, one whose one-row product was chosen, one whose weight is FP8): one class per (mixin, class),
which ``copy.deepcopy``, ``pickle`` and ``torch.save`` can rebuild. pickle finds a class by its module and name,
which a class made at run time lacks ("Can't pickle <class 'PackedLinear'>"), so such a module is reduced to the
pair and its state; the attributes its mixin lists in ``TRANSIENT`` (a oneDNN copy of the weight, which neither
copies nor pickles) are left out and made again when next needed."""
from __future__ import annotations

import functools


@functools.cache
def mixed(mixin: type, base: type) -> type:
    """The class ``(mixin, base)``, named ``mixin.PREFIX + base.__name__`` (``PackedLinear``), made once."""
    return type(f"{mixin.PREFIX}{base.__name__}", (mixin, base), {"__reduce_ex__": _reduce_ex})


def _reduce_ex(self, protocol: int):
    mixin, base = type(self).__bases__
    transient = getattr(mixin, "TRANSIENT", ())
    state = {k: v for k, v in self.__getstate__().items() if k not in transient}
    return _remade, (mixin, base), state


def _remade(mixin: type, base: type):
    cls = mixed(mixin, base)
    return cls.__new__(cls)
