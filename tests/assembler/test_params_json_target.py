"""A target folder holding Mistral's params.json and no config.json (a consolidated download given as the target) is
a CheckpointError naming config.json, as before 5e0b690: the byte-order-mark check that commit added to
target_hf_config opened config.json unguarded, so the load ended in FileNotFoundError (the CLI's internal error,
exit 70)."""
import pytest

import draftsmith
from draftsmith.errors import CheckpointError
from draftsmith.testing import SMALL, write_eagle3, write_target


def test_a_target_of_params_json_alone_is_said_as_a_checkpoint_error(tmp_path):
    target = write_target(tmp_path / "t", **SMALL)
    draft = write_eagle3(tmp_path / "d", target)
    (target / "config.json").rename(target / "params.json")
    with pytest.raises(CheckpointError, match="config.json: transformers cannot read it"):
        draftsmith.assemble("eagle3-llama", target=target, draft=draft)
