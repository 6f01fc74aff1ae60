"""A ``${key}`` in a plugin weight rule's params is refused at its dotted path, naming the plugin: draftsmith binds
placeholders in the built-in regex and split rules only, so the plugin's rule got the text as written and matched
nothing ("auto found no 'layers.N.' tensors", found by a dogfooding helper)."""
import re

import pytest
import yaml
from pydantic import BaseModel, ConfigDict

import draftsmith
from draftsmith.components.rule_config import UnboundRules
from draftsmith.components.weights import RegexRule
from draftsmith.hooks import Component

from test_plugin_mistakes import pair, spec_file  # noqa: F401  (pair: the module's fixture)
from test_plugins import Plugin, fresh


class PrefixParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    old: str
    new: str


def prefix(params):
    return RegexRule(match=f"^{re.escape(params.old)}", replace=params.new)


@pytest.mark.parametrize("old, refused", [("midlayer.", False), ("midlayer${num_hidden_layers}.", True)])
def test_a_placeholder_in_a_plugin_rule_is_refused_at_its_path(tmp_path, pair, old, refused):  # noqa: F811
    reg = fresh(("rules", Plugin([Component("weight_rule", "prefix", prefix, PrefixParams)])))
    path = spec_file(tmp_path, {"kind": "rms"}, rules=[{"kind": "prefix", "old": old, "new": "layers.0."}])
    spec = draftsmith.load_spec(path, reg)
    if not refused:
        draftsmith.assemble(spec, target=pair[0], draft=pair[1], registry=reg)
        return
    with pytest.raises(UnboundRules) as info:
        draftsmith.assemble(spec, target=pair[0], draft=pair[1], registry=reg)
    [problem] = info.value.problems
    assert problem.path == "weights.rules.0" and "plugin rule kind 'prefix' (plugin 'rules')" in problem.message
    assert yaml.safe_load(path.read_text())["weights"]["rules"][0]["old"] == old


def test_a_rule_kind_no_plugin_provides_is_said_by_name(tmp_path, pair):  # noqa: F811
    # the placeholder check asked the kind's provider first: a KeyError, an internal error (a review)
    from draftsmith.assembler.build import rule_set
    from draftsmith.registry import UnknownComponent

    reg = fresh(("rules", Plugin([Component("weight_rule", "prefix", prefix, PrefixParams)])))
    path = spec_file(tmp_path, {"kind": "rms"}, rules=[{"kind": "prefix", "old": "midlayer.", "new": "layers.0."}])
    spec = draftsmith.load_spec(path, reg)
    with pytest.raises(UnknownComponent, match="unknown weight_rule 'prefix'"):
        rule_set(spec, fresh())
