"""Target-loading problems a review found: a ``text_config`` object in a Llama config.json (ignored, as
transformers' Llama ignores it), a tied target whose files hold a different lm_head.weight (refused, naming what
each transformers version does), and a longrope target asked past original_max_position_embeddings (refused
before any forward: transformers switches to the long factors there, draftsmith keeps the short ones)."""
import json
import re
import shutil

import pytest
from typer.testing import CliRunner

from draftsmith.cli import app
from draftsmith.testing import write_eagle3, write_target

SMALL = dict(hidden_size=16, intermediate_size=32, num_attention_heads=2, num_key_value_heads=1, num_hidden_layers=4,
             vocab_size=32)


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "1000"})


def edited(src, dst, edit):
    """A copy of the checkpoint folder ``src`` whose config.json ``edit`` changed in place."""
    shutil.copytree(src, dst)
    cfg = json.loads((dst / "config.json").read_text())
    edit(cfg)
    (dst / "config.json").write_text(json.dumps(cfg))
    return dst


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("review")
    target = write_target(root / "target", **SMALL)
    return target, write_eagle3(root / "draft", target, aux_ids=[0, 1, 2])


# --- 3. text_config in a Llama config.json ----------------------------------------------------------------------------

def test_a_text_config_object_in_a_llama_config_is_ignored_as_transformers_ignores_it(pair, tmp_path):
    """transformers keeps the key as a plain dict on a LlamaConfig (get_text_config returns it); it was read as the
    text model's config (AttributeError: 'dict' object has no attribute 'hidden_size', exit 70). The output is the
    plain folder's."""
    target, draft = pair
    nested = edited(target, tmp_path / "nested", lambda c: c.update(text_config={"hidden_size": 999}))
    outs = []
    for folder in (target, nested):
        res = run("generate", "--target", folder, "--draft", draft, "--token-ids", "5,6,7", "--max-new-tokens", "6",
                  "--no-compare")
        assert res.exit_code == 0, res.output
        outs.append(re.search(r"^output .*$", res.stdout, re.M).group(0))
    assert outs[0] == outs[1]
