"""Round 37b: remote_tokenizer_problem tries transformers' AutoTokenizer without the checkpoint's code
(trust_remote_code=False, never True) where tokenizer_config.json's auto_map names a tokenizer class."""
import json

import transformers

from draftsmith.assembler.remote_code import remote_tokenizer_problem


def test_the_tokenizer_is_tried_without_remote_code(tmp_path, monkeypatch):
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(
        {"auto_map": {"AutoTokenizer": ["tokenization_kimi.TikTokenTokenizer", None]}}))
    seen = []

    def from_pretrained(path, **kw):
        seen.append(kw)
        if kw.get("trust_remote_code"):
            return object()   # what running the checkpoint's code would give
        raise ValueError("the repository contains custom code; pass trust_remote_code=True")

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", from_pretrained)
    said = remote_tokenizer_problem(tmp_path)
    assert seen == [{"trust_remote_code": False}]
    assert "tokenization_kimi.TikTokenTokenizer" in said and "--token-ids" in said
