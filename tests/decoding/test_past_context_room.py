"""A prompt longer than the target's context was refused with its length and the context only ("10 tokens; the
target's context (max_position_embeddings) is 8"): it now says by how much, and the length that leaves room for
the new tokens asked (the last one is never fed, as the max_new_tokens check counts), or that both must shrink."""
from typer.testing import CliRunner

from draftsmith.cli import app
from draftsmith.decoding.prompts import encode_prompts
from draftsmith.testing import edit_config, write_eagle3, write_target

SAID = "prompt: 10 tokens; the target's context (max_position_embeddings) is 8: 2 over; "


def said(max_new_tokens) -> list[str]:
    out: list[str] = []
    encode_prompts(list(range(10)), tokenizer=None, vocab=32, context=8, problems=out, max_new_tokens=max_new_tokens)
    return out


def test_the_refusal_gives_the_excess_and_the_length_that_fits():
    assert said(3) == [SAID + "shorten it to at most 6 tokens, which leaves room for max_new_tokens 3 (the last new "
                              "token is never fed)"]
    assert said(None) == said(0) == said("3") == [SAID + "shorten it to at most 8 tokens (one new token then fits)"]
    assert said(20) == [SAID + "shorten it, and lower max_new_tokens 20: a prompt of P tokens leaves room for 8 - P + "
                               "1 new ones"]


def test_the_command_line_says_it_under_its_options(tmp_path):
    target = write_target(tmp_path / "t", "llama", seed=1)
    write_eagle3(tmp_path / "d", target)
    small = edit_config(target, tmp_path / "s", max_position_embeddings=8)
    res = CliRunner().invoke(app, ["generate", "--target", str(small), "--draft", str(tmp_path / "d"), "--token-ids",
                                   ",".join(map(str, range(10))), "--max-new-tokens", "3", "--no-compare"])
    assert res.exit_code == 2, res.output
    assert ("error: --token-ids: 10 tokens; the target's context (max_position_embeddings) is 8: 2 over; shorten it "
            "to at most 6 tokens, which leaves room for --max-new-tokens 3" in res.output), res.output
