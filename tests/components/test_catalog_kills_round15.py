"""Mutation survivors of draftsmith.components.catalog: the 'flash' attention backend is flash-attn's where
flash-attn is installed and a one-line OptionError (install hint, the alternatives) where it is not, and the
params of quant 'none' are frozen like every other component's params."""
import pydantic
import pytest

import draftsmith
from draftsmith.components import backends
from draftsmith.components.catalog import Strict
from draftsmith.errors import OptionError


# catches catalog.py:26 not backends.has_flash_attn() -> backends.has_flash_attn() (refused where it is installed)
def test_the_flash_backend_is_flash_attn_s_where_flash_attn_is_installed(monkeypatch):
    monkeypatch.setattr(backends, "has_flash_attn", lambda: True)
    assert draftsmith.default_registry().build("attn_backend", "flash") is backends.flash


# catches catalog.py:26 not backends.has_flash_attn() -> backends.has_flash_attn() (handed out where it is absent)
def test_the_flash_backend_without_flash_attn_says_how_to_get_it(monkeypatch):
    monkeypatch.setattr(backends, "has_flash_attn", lambda: False)
    with pytest.raises(OptionError) as err:
        draftsmith.default_registry().build("attn_backend", "flash")
    assert str(err.value) == ("attention backend 'flash' needs flash-attn: pip install 'draftsmith[flash]' on a CUDA "
                              "machine, or use 'auto' / 'sdpa'")


# catches catalog.py:18 ConfigDict(extra='forbid', frozen=True) -> frozen=False
def test_the_params_of_quant_none_are_frozen_and_forbid_extra_keys():
    params = draftsmith.default_registry().get("quant", "none").params
    assert params is Strict
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        Strict().anything = 1
    assert hash(Strict()) == hash(Strict())
    with pytest.raises(pydantic.ValidationError, match="Extra inputs are not permitted"):
        Strict(method="fp8")
