"""A gpt-oss target's ``moe: stacked`` block under torch.compile: a trace looks no row up (the eager loop's nonzero
and tolist would break the graph at every layer), so it compiles as one graph (fullgraph: a break fails) taking
every expert, and equals the eager loop."""
import torch

from draftsmith.assembler.assemble import load_target
from draftsmith.components import backends
from draftsmith.registry import default_registry
from draftsmith.testing import write_target

GPT_OSS = dict(num_hidden_layers=1, num_local_experts=4, num_experts_per_tok=2, intermediate_size=32, head_dim=16,
               swiglu_limit=1.0)


def test_a_stacked_moe_block_compiles_as_one_graph_and_equals_the_eager_loop(tmp_path):
    folder = write_target(tmp_path / "t", "gpt_oss", seed=2, **GPT_OSS)
    block = load_target(folder, default_registry(), backends.sdpa, dtype=torch.float32, device="cpu")[0] \
        .model.layers[0].mlp
    x = torch.randn(1, 23, 64, generator=torch.Generator().manual_seed(1))
    torch._dynamo.reset()
    try:
        with torch.no_grad():
            eager = block(x)
            got = torch.compile(block, fullgraph=True, backend="aot_eager")(x)
    finally:
        torch._dynamo.reset()
    torch.testing.assert_close(got, eager, atol=1e-5, rtol=0)
