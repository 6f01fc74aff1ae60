import copy
from pathlib import Path

import pytest
import yaml

import draftsmith
from draftsmith.specs.catalog import BUILTIN_DIR

BASE = yaml.safe_load((BUILTIN_DIR / "eagle3-llama.yaml").read_text())


@pytest.fixture
def registry():
    """Built-ins only, on a fresh plugin manager (no installed entry points)."""
    return draftsmith.build_registry(entry_points=False)


@pytest.fixture
def base():
    """A valid spec as plain data (the built-in eagle3-llama), safe to mutate."""
    return copy.deepcopy(BASE)


@pytest.fixture
def spec_error(tmp_path, registry):
    """Write ``data`` as ``my-draft.yaml``, load it by path and return the SpecError it must raise."""

    def load(data, name="my-draft.yaml") -> draftsmith.SpecError:
        path = Path(tmp_path) / name
        path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
        with pytest.raises(draftsmith.SpecError) as info:
            draftsmith.load_spec(path, registry=registry)
        err = info.value
        assert str(path) in str(err) and err.source == str(path)
        return err

    return load
