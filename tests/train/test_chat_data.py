"""train --chat: chat records (`messages`, ShareGPT `conversations`) are rendered by the target's chat template, so
the draft learns on the text an instruct model sees; without --chat their turns are joined as before. A target
without a template is refused in preflight, a turn without a role or one the template refuses is named by file
and line, and a resumed run keeps the setting."""
import json
import shutil

import pytest

from draftsmith.train import data as D
from draftsmith.train import records as R
from draftsmith.train.checks import TrainError
from draftsmith.train.pipeline import run
from draftsmith.train.resume import run_changes

TEMPLATE = ("{% for m in messages %}{% if m['role'] not in ['system', 'user', 'assistant'] %}"
            "{{ raise_exception('unknown role ' + m['role']) }}{% endif %}"
            "<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
            "{% if add_generation_prompt %}<|assistant|>{% endif %}")


def chatml(turns):   # what TEMPLATE writes, by hand (the oracle the tokenizer's rendering is held to)
    return "".join(f"<|{t['role']}|>{t['content']}\n" for t in turns)


def test_sharegpt_speakers_become_roles_and_messages_keep_theirs():
    seen = []
    render = lambda turns: seen.append(turns) or "R"   # noqa: E731
    share = {"conversations": [{"from": "system", "value": "s"}, {"from": "human", "value": "q"},
                               {"from": "gpt", "value": [{"type": "text", "text": "a"}]}]}
    assert R.jsonl_text(share, render) == "R"
    assert R.jsonl_text({"messages": [{"role": "user", "content": "m"}, {"role": "tool", "content": None}]},
                        render) == "R"
    # a list of parts goes on as it is: chat.render joins it for a template that writes content as a string and
    # passes it to one that loops over parts, as generate() does (the review of round 27)
    assert seen == [[{"role": "system", "content": "s"}, {"role": "user", "content": "q"},
                     {"role": "assistant", "content": [{"type": "text", "text": "a"}]}],
                    [{"role": "user", "content": "m"}, {"role": "tool", "content": ""}]]
    assert R.jsonl_text(share) == "s\nq\na"                       # without --chat: joined, as before
    assert R.jsonl_text({"text": "t"}, render) == "t"              # text records are not chats


def test_a_turn_without_a_role_or_one_the_template_refuses_is_named_by_file_and_line(tmp_path):
    f = tmp_path / "chats.jsonl"
    f.write_text(json.dumps({"messages": [{"role": "user", "content": "ok"}]}) + "\n"
                 + json.dumps({"conversations": [{"from": "human", "value": "q"}, {"value": "a"}]}) + "\n")
    with pytest.raises(TrainError, match=r"chats.jsonl:2: conversations\[1\].from is missing: --chat renders each "
                                         r"turn with its role"):
        D.read_documents([f], render=lambda turns: "x")



def test_chats_the_template_refuses_are_skipped_and_counted_apart(tmp_path):
    """Real ShareGPT data holds chats a strict template refuses (one opening with the assistant): skipped and
    counted with the template's reason, as records without text are, not the end of the run."""
    from draftsmith.chat import TemplateRefused
    from draftsmith.train.data_checks import skipped_note

    def strict(turns):
        if turns[0]["role"] != "user":
            raise TemplateRefused("the chat template refused it: TemplateError: roles must alternate")
        return "|".join(t["content"] for t in turns)

    f = tmp_path / "sg.jsonl"
    rows = [{"conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}]},
            {"conversations": [{"from": "gpt", "value": "a"}]}, {"id": 3}]
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    textless = []
    assert D.read_documents([f], textless=textless, render=strict) == ["q|a"]
    assert textless == [f"{f}:2", f"{f}:3"] and isinstance(textless[0], R.Refused)
    note = skipped_note([], textless)
    assert "1 record without text skipped" in note and f"{f}:3" in note
    assert f"1 chat record the chat template refused skipped (the chat template refused it: TemplateError: roles " \
           f"must alternate): {f}:2" in note


def test_trls_conversational_prompt_and_completion_is_one_chat():
    seen = []
    record = {"prompt": [{"role": "user", "content": "q"}], "completion": [{"role": "assistant", "content": "a"}]}
    assert R.jsonl_text(record, lambda turns: seen.append(turns) or "R") == "R"
    assert seen == [[{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]]
    assert R.jsonl_text(record) == "q\na"
    with pytest.raises(ValueError, match="a conversational prompt .* takes a list of messages or null"):
        R.jsonl_text({**record, "completion": "a"})


@pytest.fixture
def chat_target(tiny, tmp_path):
    from draftsmith.testing import write_byte_tokenizer

    t = tmp_path / "chat-target"
    shutil.copytree(tiny / "target", t)
    write_byte_tokenizer(t, chat_template=TEMPLATE)
    return t


def test_chat_records_train_on_the_template_text_and_held_out_prompts_start_it(job, chat_target, chats, tmp_path):
    from transformers import AutoTokenizer

    from draftsmith.train.pipeline import chat_render

    f, turns = chats
    j = job(tmp_path / "out", target=chat_target, data=[f.parent], chat=True)
    tok = AutoTokenizer.from_pretrained(str(chat_target))
    render = chat_render(j, tok)
    assert D.read_documents([f], render=render) == [chatml(turns(i)) for i in range(12)]
    prompts = D.held_out_prompts([f], tok, 3, 40, render=render)
    starts = {tuple(tok(chatml(turns(i)), add_special_tokens=False)["input_ids"][:40]) for i in range(12)}
    assert len(prompts) == 3 and all(tuple(p) in starts for p in prompts)
    assert chat_render(job(tmp_path / "o2", target=chat_target, data=[f.parent]), tok) is None


def test_a_chat_run_trains_on_the_template_text_and_a_resume_without_chat_is_refused(job, chat_target, chats,
                                                                                      tmp_path):
    from transformers import AutoTokenizer

    f, turns = chats
    tok = AutoTokenizer.from_pretrained(str(chat_target))
    tokens = sum(len(tok(chatml(turns(i)), add_special_tokens=False)["input_ids"]) + 1 for i in range(12))  # + eos
    out, said = tmp_path / "out", []
    run(job(out, target=chat_target, data=[f.parent], chat=True, config={"steps": 2}), log=said.append)
    assert (out / "model.safetensors").is_file()
    assert f"data: 12 documents, {tokens} tokens" in said, said
    with pytest.raises(TrainError, match=r"chat --no-chat: the run in .* was started with --chat, .* give --chat "
                                         r"again"):
        run(job(out, target=chat_target, data=[f.parent], config={"steps": 3}))


def test_chat_on_a_target_without_a_template_is_refused_before_any_reading(job, tiny, chats, tmp_path):
    f, _ = chats
    with pytest.raises(TrainError, match=r"has no chat template .* which --chat renders the chat records with: "
                                         r"drop --chat") as e:
        run(job(tmp_path / "out", data=[f.parent], chat=True))
    assert [p[0] for p in e.value.problems] == ["chat"]
    assert not (tmp_path / "out" / "model.safetensors").exists()


def test_eval_only_under_the_other_chat_setting_is_told(job, chat_target, chats, tmp_path):
    f, _ = chats
    out, said = tmp_path / "out", []
    run(job(out, target=chat_target, data=[f.parent], chat=True, config={"steps": 1}))
    run(job(out, target=chat_target, data=[f.parent], eval_only=True, eval_prompts=1), log=said.append)
    assert any("was trained with --chat; its held-out chat records are read here with --no-chat" in s
               for s in said), said
    said.clear()
    run(job(out, target=chat_target, data=[f.parent], chat=True, eval_only=True, eval_prompts=1), log=said.append)
    assert not any("was trained with" in s for s in said)


def test_a_flipped_chat_setting_is_said_as_its_option(tmp_path):
    assert run_changes({"chat": True}, {"chat": False}, tmp_path) == [("chat", "--no-chat", "--chat", "--chat")]
    assert run_changes({"chat": False}, {"chat": False}, tmp_path) == []
    assert run_changes({}, {"chat": True}, tmp_path) == []   # an older record states none: not compared


def test_the_cli_passes_chat(tiny, chats, tmp_path):
    from typer.testing import CliRunner

    from draftsmith.cli import app

    f, _ = chats
    res = CliRunner().invoke(app, ["train", "--target", str(tiny / "target"), "--data", str(f.parent), "--out",
                                   str(tmp_path / "out"), "--chat", "--steps", "1"])
    assert res.exit_code == 2 and "has no chat template" in res.output, res.output


def test_text_wins_over_a_conversational_prompt_as_documented():
    record = {"text": "TEXT", "prompt": [{"role": "user", "content": "q"}]}
    assert R.jsonl_text(record) == "TEXT" and R.jsonl_text(record, lambda turns: "R") == "TEXT"
