"""A plugin weight rule's optional methods (hooks.kinds.Kind.optional): a split rule's ``parts`` and ``produces``.
A rule may lack them; where it has them they are guarded as ``apply`` is: an exception, or an answer of another
sort (parts: a non-empty tuple or list of str, or None; produces: a bool), is a ComponentFailed naming the plugin
and the call, and a draftsmith error (SplitRefused) passes as it is. One that is there but not callable is refused
when the factory's result is checked."""
import pytest
from pydantic import BaseModel, ConfigDict

from draftsmith.components.weights import RuleSet, SplitRefused
from draftsmith.hooks import Component
from draftsmith.registry import ComponentFailed

from test_plugins import Plugin, fresh


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DuckSplit:
    """A plugin's own split rule: 'qk.*' is q | k; ``parts`` / ``produces`` answer what they were given."""

    inverse = None

    def __init__(self, parts=None, produces=None):
        self.answer, self.produced = parts, produces

    def parts(self, name):
        if not name.startswith("qk."):
            return None
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer if self.answer is not None else ["q." + name[3:], "k." + name[3:]]

    def produces(self, name):
        if isinstance(self.produced, Exception):
            raise self.produced
        return self.produced if self.produced is not None else name.startswith(("q.", "k."))

    def apply(self, name):
        parts = self.parts(name)
        return None if parts is None else parts[0]

    def invert(self, name):
        raise SplitRefused(f"{name!r} is one part of a fused tensor")

    def describe(self, index=None):
        return "duck split"


def rules(rule) -> RuleSet:
    made = fresh(("mine", Plugin([Component("weight_rule", "mine", lambda params: rule, Strict)])))
    return RuleSet([made.build("weight_rule", "mine", Strict())])


WHO = r"^weight_rule 'mine' \(plugin 'mine'\): "


def test_a_plugin_split_rule_maps_a_name_to_its_parts_and_refuses_writing_one_back():
    split = rules(DuckSplit())
    assert split.to_parts("qk.weight") == (("q.weight", "k.weight"), 0)
    assert split.to_parts("o.weight") == (("o.weight",), None)
    assert split.remap(["qk.weight"]).split == {"qk.weight": ("q.weight", "k.weight")}
    with pytest.raises(SplitRefused, match="one part of a fused tensor under duck split"):
        split.from_canonical("k.weight")
    assert split.from_canonical("o.weight") == "o.weight"


@pytest.mark.parametrize("answer, message", [
    (KeyError("qk.weight"), r"its parts\('qk.weight'\) raised KeyError: 'qk.weight' \(in "
                            r"test_plugin_rule_parts\.DuckSplit\.parts, line \d+\)$"),
    ("q.weight", r"its parts\('qk.weight'\) returned 'q.weight'; parts must return a non-empty tuple or list of str "
                 r"or None$"),   # a string would have been read as its characters
    ([], r"its parts\('qk.weight'\) returned \[\]; parts must return"),
    (["q.weight", 5], r"its parts\('qk.weight'\) returned \['q.weight', 5\]; parts must return"),
])
def test_a_plugin_rules_parts_that_fails_is_named(answer, message):
    with pytest.raises(ComponentFailed, match=WHO + message):
        rules(DuckSplit(parts=answer)).to_parts("qk.weight")


@pytest.mark.parametrize("answer, message", [
    (RuntimeError("no table"), r"its produces\('k.weight'\) raised RuntimeError: no table \(in "
                               r"test_plugin_rule_parts\.DuckSplit\.produces, line \d+\)$"),
    ("yes", r"its produces\('k.weight'\) returned 'yes'; produces must return bool$"),
])
def test_a_plugin_rules_produces_that_fails_is_named(answer, message):
    with pytest.raises(ComponentFailed, match=WHO + message):
        rules(DuckSplit(produces=answer)).from_canonical("k.weight")


def test_a_rule_without_parts_is_a_rename_and_one_whose_parts_is_no_method_is_refused():
    class Rename:
        inverse = None

        def apply(self, name):
            return "layers.0." + name[9:] if name.startswith("midlayer.") else None

        def invert(self, name):
            return None

        def describe(self, index=None):
            return "rename"

    assert rules(Rename()).to_parts("midlayer.fc.weight") == (("layers.0.fc.weight",), 0)

    class Broken(DuckSplit):
        parts = ["q.", "k."]

    with pytest.raises(ComponentFailed, match=WHO + r"its factory returned .* \(its parts is not callable\); the "
                                                    r"assembler calls it as factory\(params\)"):
        rules(Broken())
