"""Conversation prompts: generate() renders a list of {"role", "content"} messages with the target tokenizer's
chat template (the generation prompt added) and decodes it as those ids; bad conversations are argument problems."""
import pytest

import draftsmith
from draftsmith.errors import ArgumentError
from draftsmith.testing import write_byte_tokenizer, write_eagle3, write_target

# a ChatML-like template; it refuses a role it does not know, as real templates do
TEMPLATE = ("{% for m in messages %}{% if m['role'] not in ['system', 'user', 'assistant'] %}"
            "{{ raise_exception('unknown role ' + m['role']) }}{% endif %}"
            "<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
            "{% if add_generation_prompt %}<|assistant|>{% endif %}")


@pytest.fixture(scope="module")
def chat_pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("chat")
    write_target(root / "t", tokenizer=True, num_hidden_layers=8)
    write_byte_tokenizer(root / "t", chat_template=TEMPLATE)
    write_target(root / "plain", tokenizer=True, num_hidden_layers=8)   # no chat template
    write_eagle3(root / "d", root / "t")
    load = lambda t: draftsmith.assemble("eagle3-llama", target=root / t, draft=root / "d",   # noqa: E731
                                         dtype="float64")
    return load("t"), load("plain")


def test_a_conversation_is_the_templated_text_with_the_assistant_turn_opened(chat_pair):
    model, _ = chat_pair
    talk = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    text = "<|system|>Be brief.\n<|user|>Hi\n<|assistant|>"
    ids = model.tokenizer.encode(text, add_special_tokens=False)
    got = model.generate(talk, max_new_tokens=12)
    assert got.token_ids == model.generate(ids, max_new_tokens=12).token_ids
    assert got.token_ids == model.generate_baseline(talk, max_new_tokens=12).token_ids   # lossless, as any prompt


def test_contents_read_as_training_data_reads_them(chat_pair):
    """A null content (a turn that only calls a tool) is empty text; OpenAI-style parts are their text parts."""
    model, _ = chat_pair
    parts = [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url"},
                                          {"type": "text", "text": "b"}]}, {"role": "assistant", "content": None}]
    ids = model.tokenizer.encode("<|user|>a\nb\n<|assistant|>\n<|assistant|>", add_special_tokens=False)
    assert model.generate(parts, max_new_tokens=6).token_ids == model.generate(ids, max_new_tokens=6).token_ids


def test_a_batch_of_conversations_and_text_decodes_each_as_alone(chat_pair):
    model, _ = chat_pair
    a, b = [{"role": "user", "content": "one"}], [{"role": "user", "content": "two"}, {"role": "assistant",
                                                                                   "content": "2"}]
    batch = model.generate([a, "plain text", b], max_new_tokens=8)
    assert [o.token_ids for o in batch] == [model.generate(p, max_new_tokens=8).token_ids
                                            for p in (a, "plain text", b)]


def test_template_ids_are_encoded_without_added_special_tokens(chat_pair, tmp_path):
    """A tokenizer that adds <s> to what it encodes must not add it to a template's text (which writes its own)."""
    from tokenizers.processors import TemplateProcessing
    from transformers import AutoTokenizer

    from draftsmith.chat import conversation_ids

    write_byte_tokenizer(tmp_path, chat_template=TEMPLATE)
    tok = AutoTokenizer.from_pretrained(str(tmp_path))
    tok._tokenizer.post_processor = TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 256)])
    assert tok.encode("x")[0] == 256   # this tokenizer adds one
    ids = conversation_ids(tok, [{"role": "user", "content": "x"}])
    assert ids == tok.encode("<|user|>x\n<|assistant|>", add_special_tokens=False) and 256 not in ids


@pytest.mark.parametrize("talk, said", [
    ([{"role": "user"}], "prompt: message 0's content is missing; it must be text"),
    ([{"role": "user", "content": 3}], "prompt: message 0's content is 3: expected a string, null or a list of parts"),
    ([{"role": 1, "content": "x"}], "prompt: message 0's role is 1 (int); it must be a string"),
    ([{"role": "robot", "content": "x"}], "prompt: the chat template refused it: TemplateError: unknown role robot"),
    ([{"role": "user", "content": "a\ud800"}], "prompt: message 0 holds a lone surrogate"),
])
def test_a_bad_conversation_is_an_argument_problem(chat_pair, talk, said):
    model, _ = chat_pair
    with pytest.raises(ArgumentError) as info:
        model.generate(talk, max_new_tokens=4)
    assert said in str(info.value)


def test_every_bad_conversation_of_a_batch_is_listed(chat_pair):
    model, _ = chat_pair
    with pytest.raises(ArgumentError) as info:
        model.generate([[{"role": "user"}], "fine", [{"content": "x"}]], max_new_tokens=4)
    assert "prompt 0: message 0's content is missing" in str(info.value)
    assert "prompt 2: message 0's role is missing" in str(info.value)
    assert "prompt 1" not in str(info.value)


def test_a_target_without_a_chat_template_says_so(chat_pair):
    _, plain = chat_pair
    with pytest.raises(ArgumentError, match="has no chat template .* pass text or token ids instead"):
        plain.generate([{"role": "user", "content": "x"}], max_new_tokens=4)


def test_the_cli_refuses_chat_with_token_ids_before_loading():
    from typer.testing import CliRunner

    from draftsmith.cli import app

    res = CliRunner().invoke(app, ["generate", "--spec", "demo", "--chat", "--token-ids", "1,2"])
    assert res.exit_code == 2 and "--chat renders text through the chat template" in res.output, res.output


def test_generate_chat_on_a_target_without_a_template_says_drop_chat_before_loading(tmp_path, monkeypatch):
    """An API hunt: it was said once both models had loaded (10 s on a 0.5 GB pair); the tokenizer's files tell."""
    from typer.testing import CliRunner

    import draftsmith
    from draftsmith.cli import app

    t = write_target(tmp_path / "t", tokenizer=True, num_hidden_layers=8)
    d = write_eagle3(tmp_path / "d", t)
    monkeypatch.setattr(draftsmith, "assemble", lambda *a, **k: pytest.fail("loaded"))
    res = CliRunner().invoke(app, ["generate", "--spec", "eagle3-llama", "--target", str(t), "--draft", str(d),
                                   "--chat", "--prompt", "hi", "--max-new-tokens", "2", "--no-compare"])
    assert res.exit_code == 2, res.output
    assert f"--chat: the target's tokenizer in {t} has no chat template" in res.output and "drop --chat" in \
        res.output, res.output


def test_a_chat_template_file_linked_from_outside_the_folder_is_refused_like_other_tokenizer_files(tmp_path):
    t = write_target(tmp_path / "t", tokenizer=True, num_hidden_layers=8)
    d = write_eagle3(tmp_path / "d", t)
    (tmp_path / "outside.jinja").write_text(TEMPLATE)
    (t / "chat_template.jinja").symlink_to(tmp_path / "outside.jinja")
    with pytest.raises(draftsmith.errors.CheckpointError, match="chat_template.jinja"):
        draftsmith.assemble("eagle3-llama", target=t, draft=d)


# --- a conversation's length: its rendered tokens, not its messages ---------------------------------------------

def test_a_conversation_past_the_context_says_its_messages_and_rendered_tokens(chat_pair, monkeypatch):
    """Checked on the ids the template renders, before any forward: many messages, or one long one."""
    from draftsmith.chat import conversation_ids

    model, _ = chat_pair
    for m in (model.target, model.draft):
        monkeypatch.setattr(m, "forward", lambda *a, **k: pytest.fail("a forward ran before the checks"))
    context = model.target.dims.config.max_position_embeddings
    many = [{"role": "user", "content": "x"}] * (context + 1)
    long = [{"role": "user", "content": "x" * context}]
    for talk, messages in ((many, f"{context + 1} messages"), (long, "1 message")):
        tokens = len(conversation_ids(model.tokenizer, talk))
        with pytest.raises(ArgumentError) as info:
            model.generate([[1, 2], talk], max_new_tokens=1)
        assert info.value.problems == [f"prompt 1: a conversation of {messages} rendered to {tokens} tokens; the "
                                       f"target's context (max_position_embeddings) is {context}: "
                                       f"{tokens - context} over; shorten it to at most {context} tokens, which "
                                       "leaves room for max_new_tokens 1 (the last new token is never fed)"]


def test_a_conversation_of_more_messages_than_the_context_that_renders_short_decodes(tmp_path):
    """A template that writes only the last message: 80 messages past a context of 64 are 10 tokens."""
    t = write_target(tmp_path / "t", tokenizer=True, num_hidden_layers=8, max_position_embeddings=64)
    write_byte_tokenizer(t, chat_template="{{ messages[-1]['content'] }}<|a|>")
    model = draftsmith.assemble("eagle3-llama", target=t, draft=write_eagle3(tmp_path / "d", t), dtype="float64")
    talk = [{"role": "user", "content": "old"}] * 79 + [{"role": "user", "content": "last"}]
    ids = model.tokenizer.encode("last<|a|>", add_special_tokens=False)
    assert model.generate(talk, max_new_tokens=4).token_ids == model.generate(ids, max_new_tokens=4).token_ids


def test_a_message_with_a_tool_call_reaches_the_template(chat_pair):
    """A message's other keys (a tool call's list of mappings) are not text: the lone-surrogate check reads only
    its strings, and the template gets the rest as it is."""
    model, _ = chat_pair
    call = [{"id": "1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    talk = [{"role": "user", "content": "x"}, {"role": "assistant", "content": None, "tool_calls": call},
            {"role": "user", "content": "y"}]
    ids = model.tokenizer.encode("<|user|>x\n<|assistant|>\n<|user|>y\n<|assistant|>", add_special_tokens=False)
    assert model.generate(talk, max_new_tokens=4).token_ids == model.generate(ids, max_new_tokens=4).token_ids
    with pytest.raises(ArgumentError, match="prompt: message 1 holds a lone surrogate"):
        model.generate([talk[0], {**talk[1], "name": "f\ud800"}], max_new_tokens=4)
    # one inside the tool call's mappings (its arguments; a key too) is found there, before the template runs
    for bad in ({"name": "f", "arguments": "{\"a\": \"\udcff\"}"}, {"name": "f", "\ud800": "{}"}):
        deep = [{**call[0], "function": bad}]
        with pytest.raises(ArgumentError, match="prompt: message 1 holds a lone surrogate"):
            model.generate([talk[0], {**talk[1], "tool_calls": deep}], max_new_tokens=4)


def _within(seconds, fn):
    """fn() under an alarm: a walk that never ends fails the test instead of hanging it."""
    import signal

    def ring(*_):
        raise TimeoutError(f"still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, ring)
    signal.alarm(seconds)
    try:
        return fn()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def test_a_tool_call_that_holds_itself_or_expands_past_the_bound_is_refused_before_the_template(chat_pair):
    """A message whose tool_calls hold the message (no template can write it) and a part held twice at each of 40
    levels (2^40 values written, which a template's tojson would write for hours) are refused by what they hold,
    counted once per container, before the template runs; the strings walk meets each container once, across
    messages too."""
    from draftsmith.chat import nested_strings, written_size

    model, _ = chat_pair
    m = {"role": "assistant", "content": "hi"}
    m["tool_calls"] = [m]
    with pytest.raises(ArgumentError, match=r"prompt: a conversation that holds itself \(a message or tool call"):
        _within(10, lambda: model.generate([{"role": "user", "content": "q"}, m], max_new_tokens=2))
    shared = {"name": "f"}
    for _ in range(40):
        shared = {"l": shared, "r": shared}
    deep = {"role": "assistant", "content": None, "tool_calls": [{"type": "function", "function": shared}]}
    with pytest.raises(ArgumentError, match="prompt: a conversation that holds more than 131072 values as its "
                                            "template writes them"):
        _within(10, lambda: model.generate([{"role": "user", "content": "q"}, deep], max_new_tokens=2))
    assert sorted(_within(10, lambda: list(nested_strings(shared)))) == ["f", *["l"] * 40, "name", *["r"] * 40]
    # counted as written: a part held twice counts twice, each leaf and container once per place
    part = ["a", "b"]
    assert written_size([part, part], 100) == 1 + 2 * 3 and written_size({"k": part}, 100) == 1 + 1 + 3
    assert written_size(shared, 10**6) == 10**6 + 1   # capped past the bound
    seen: set[int] = set()
    # shared across calls
    assert list(nested_strings(part, seen)) == ["b", "a"] and list(nested_strings([part], seen)) == []


def test_a_conversation_of_more_messages_than_the_limit_is_refused_before_a_message_is_read(chat_pair,
                                                                                            monkeypatch):
    from draftsmith import limits
    from draftsmith.decoding import prompts

    model, _ = chat_pair
    monkeypatch.setattr(prompts, "message_problems", lambda *a: pytest.fail("a message was read"))
    talk = [{"role": "user", "content": "x"}] * (limits.MESSAGES + 1)
    with pytest.raises(ArgumentError, match=f"prompt: a conversation of {limits.MESSAGES + 1} messages; at most "
                                            f"{limits.MESSAGES} are read"):
        model.generate(talk, max_new_tokens=2)
