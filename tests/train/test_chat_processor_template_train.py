"""train --chat on a target whose chat template is only in the processor's chat_template.json (Mistral-Small-3.1's
layout): preflight finds it and the chat records are rendered with it, as with the same template in
tokenizer_config.json; before, preflight refused the run ("has no chat template ... drop --chat", exit 2). A
malformed chat_template.json is refused in preflight, naming the file (h118)."""
import json
import shutil

import pytest

from draftsmith.assembler.assemble import read_tokenizer
from draftsmith.testing import write_byte_tokenizer
from draftsmith.train import data as D
from draftsmith.train.checks import TrainError
from draftsmith.train.pipeline import chat_render, run
from draftsmith.train.target_checks import target_problems

TEMPLATE = "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}{{ '\\n' }}{% endfor %}"


def with_template(tiny, folder, where: str, text: str = TEMPLATE):
    """A copy of the tiny target with ``text`` in tokenizer_config.json ('config') or chat_template.json."""
    shutil.copytree(tiny / "target", folder)
    write_byte_tokenizer(folder, chat_template=text if where == "config" else None)
    if where != "config":
        (folder / "chat_template.json").write_text(json.dumps({"chat_template": text}) if where == "json" else text)
    return folder


def test_a_processor_template_passes_preflight_and_renders_as_the_tokenizers(job, tiny, chats, tmp_path):
    f, turns = chats
    proc = with_template(tiny, tmp_path / "proc", "json")
    said = with_template(tiny, tmp_path / "said", "config")
    j = job(tmp_path / "out", target=proc, data=[f.parent], chat=True)
    assert [p for p in target_problems(j) if p[0] == "chat"] == []   # before: "has no chat template ... drop --chat"
    docs = D.read_documents([f], render=chat_render(j, read_tokenizer(proc)))
    want = D.read_documents([f], render=chat_render(job(tmp_path / "o", target=said, chat=True), read_tokenizer(said)))
    assert docs == want == ["".join(f"<|{t['role']}|>{t['content']}\n" for t in turns(i)) for i in range(12)]


def test_a_chat_run_trains_on_the_processor_templates_text(job, tiny, chats, tmp_path):
    f, turns = chats
    proc = with_template(tiny, tmp_path / "proc", "json")
    tok = read_tokenizer(proc)
    text = lambda i: "".join(f"<|{t['role']}|>{t['content']}\n" for t in turns(i))   # noqa: E731
    tokens = sum(len(tok(text(i), add_special_tokens=False)["input_ids"]) + 1 for i in range(12))   # + eos
    out, said = tmp_path / "out", []
    run(job(out, target=proc, data=[f.parent], chat=True, config={"steps": 1}), log=said.append)
    assert (out / "model.safetensors").is_file()
    assert f"data: 12 documents, {tokens} tokens" in said, said


def test_a_malformed_chat_template_json_is_refused_in_preflight_naming_it(job, tiny, chats, tmp_path):
    f, _ = chats
    proc = with_template(tiny, tmp_path / "proc", "bare", text="{not json")
    with pytest.raises(TrainError, match=r"chat_template.json: cannot be read as JSON") as e:
        run(job(tmp_path / "out", target=proc, data=[f.parent], chat=True))
    assert [p[0] for p in e.value.problems] == ["chat"]
    assert str(proc / "chat_template.json") in str(e.value)
    assert not (tmp_path / "out" / "model.safetensors").exists()
