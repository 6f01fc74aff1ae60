"""Type predicates the argument checks share (:mod:`draftsmith.decoding.prompts`,
:mod:`draftsmith.decoding.arguments`, ``Spec.with_decoding``): integers, finite and real numbers, 1-D integer
tensors and numpy arrays, told apart without importing torch or numpy."""
from __future__ import annotations

import math
import numbers
from typing import Any


def is_int(v: Any) -> bool:
    # the exact-type test first: an ABC isinstance costs ~1 us, per token of a long prompt
    return type(v) is int or (isinstance(v, numbers.Integral) and not isinstance(v, bool))


def plain(v: Any) -> Any:
    """An integer of another type (numpy's int64, uint8) as a Python int, which never wraps or lacks int's methods;
    anything else as it is, for the checks to judge."""
    return int(v) if type(v) is not int and is_int(v) else v


def scalar(v: Any) -> Any:
    """A number given as a 0-d tensor or numpy array (``torch.tensor(4)``, ``x.max()``) as its Python number, then
    as :func:`plain` gives it; anything else as it is, to be said as given: a numpy scalar (already a number, or
    not: ``np.True_``), a 0-d bool, a 1-D tensor, a meta tensor (which has no value), a 0-d array of no number's
    dtype (object's ``np.array(None, dtype=object)`` would be None, a default; a timedelta's its count)."""
    if array_like(v) and v.ndim == 0 and not isinstance(v, numbers.Number) and dtype_of(v.dtype, NUMBERS):
        try:
            v = v.item()
        except (RuntimeError, ValueError):   # a meta tensor: refused as a tensor by the checks
            return v
    return plain(v)


INTEGERS = ("int", "uint")                                # int8..int64, uint8..uint64 (not bool, str or object)
NUMBERS = (*INTEGERS, "float", "bfloat", "complex")      # not datetime or timedelta either


def dtype_of(dtype: Any, kinds: tuple[str, ...]) -> bool:
    # whether a tensor's or numpy array's dtype is of these kinds (its name without torch's prefix begins with one)
    return str(dtype).removeprefix("torch.").startswith(kinds)


def is_finite(v: Any) -> bool:
    # a real number a float holds finitely (an integer past float's range is not: 10**400 overflows)
    try:
        return math.isfinite(v)
    except OverflowError:
        return False


def is_real(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def is_number(v: Any) -> bool:
    # a real number (not a bool) a float holds finitely: what a config's rope or expert number must be
    return is_real(v) and is_finite(v)


def array_like(v: Any) -> bool:
    return hasattr(v, "ndim") and hasattr(v, "dtype") and hasattr(v, "tolist")


def integer_vector(a: Any) -> bool:
    # a 1-D tensor or numpy array of integers
    return a.ndim == 1 and dtype_of(a.dtype, INTEGERS)
