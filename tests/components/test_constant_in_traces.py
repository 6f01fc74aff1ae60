"""A load's modules mark what a torch.compile trace decides once (stacked.Stacked.valid, experts.ExpertStack.valid,
experts.traceable) without importing torch._dynamo at their import: that import is ~2 s of every command's start,
a config error's too (components.backends.sdpa imports dynamo's mask lazily for the same reason)."""
import subprocess
import sys

import torch

from draftsmith.components.fused import constant_in_traces


def test_importing_the_assembler_does_not_import_dynamo():
    code = "import sys, draftsmith.assembler.assemble; print('torch._dynamo' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_the_mark_is_the_one_torch_compiler_sets():
    def ours():
        return 1

    def theirs():
        return 1
    assert constant_in_traces(ours) is ours
    assert torch.compiler.assume_constant_result(theirs) is theirs
    assert vars(ours) == vars(theirs) and vars(ours)
