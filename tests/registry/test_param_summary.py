"""``draftsmith list --params``: a default is shown as it acts. A field that, left out of a spec, reads the draft
config's key (EAGLE-3's flags) says so; a plain default is shown as it is; a required field shows none."""
from typing import Annotated

from pydantic import BaseModel, ConfigDict

from draftsmith.cli.specs import param_summary
from draftsmith.components.fusion import Eagle3Params
from draftsmith.hooks.records import ConfigFirst


def test_eagle3_flags_read_the_draft_config_first():
    text = param_summary(Eagle3Params)
    assert text.startswith("norm_before_residual, ")        # required: engines disagree on its default
    for part in ("fc_norm (draft config, else False)", "norm_before_fc (draft config, else False)",
                 "norm_output (draft config, else 'head')", "aux_layers ('auto')", "num_aux (None)"):
        assert part in text, text


def test_a_plugin_marks_its_own_config_first_field():
    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        scale: Annotated[float, ConfigFirst()] = 1.0
        plain: int = 3
        need: str

    assert param_summary(Params) == "scale (draft config, else 1.0), plain (3), need"
