"""draftsmith: speculative-decoding draft models from YAML specs.

>>> import draftsmith
>>> model = draftsmith.assemble("demo")
>>> out = model.generate("def fibonacci(n):", max_new_tokens=32)
"""
from draftsmith.assembler.assemble import assemble
from draftsmith.registry import build_registry, default_registry
from draftsmith.errors import Problem, SpecError
from draftsmith.specs.loader import list_specs, load_spec, parse_spec
from draftsmith.specs.schema import Spec

__all__ = ["Problem", "Spec", "SpecError", "assemble", "build_registry", "default_registry", "list_specs",
           "load_spec", "parse_spec"]
__version__ = "0.1.0"
