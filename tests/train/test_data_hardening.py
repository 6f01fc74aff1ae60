"""Bad training input is a TrainError naming the file (and line) with a bounded message, never an internal error
or silently wrong text: JSONL lines end at "\\n" only, null / list-of-parts contents, lone surrogates, binary
JSONL, a features.json of any shape, unreadable feature shards, and a trainer.pt that is not one."""
import json
import re
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import save_file

from draftsmith.train import data as D
from draftsmith.train import records as R
from draftsmith.train.checks import TrainError
from draftsmith.train.features import META, FeatureStore, extract
from draftsmith.train.loop import STATE, TrainConfig, train
from draftsmith.train.data_checks import no_windows
from draftsmith.train.preflight import preflight

GOOD_META = {"taps": [2, 4, 5], "seq": 48, "per_shard": 16}


def test_jsonl_lines_end_at_newline_only_so_unicode_line_separators_stay_text(tmp_path):
    f = tmp_path / "d.jsonl"   # as json.dumps(ensure_ascii=False) writes them; a CRLF file too
    f.write_text('{"text": "a\u2028b"}\r\n{"text": "c\u0085d\u2029e"}\n', encoding="utf-8", newline="")
    assert D.read_documents([f]) == ["a\u2028b", "c\u0085d\u2029e"]


def test_a_leading_byte_order_mark_is_not_part_of_the_data(tmp_path):
    f, g = tmp_path / "d.jsonl", tmp_path / "t.txt"   # as Windows editors save UTF-8
    f.write_bytes(b"\xef\xbb\xbf" + b'{"text": "a"}\n{"text": "b"}\n')
    g.write_bytes(b"\xef\xbb\xbfplain")
    assert D.read_documents([f, g]) == ["a", "b", "plain"]


@pytest.mark.parametrize("record, text", [
    ({"messages": [{"role": "assistant", "content": None, "tool_calls": []}, {"content": "hi"}]}, "\nhi"),
    ({"prompt": "Q: ", "completion": None}, "Q: "),
    ({"messages": [{"content": [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {}},
                                {"type": "text", "text": "b"}]}]}, "a\nb"),
    ({"prompt": "p", "completion": [{"type": "text", "text": "c"}]}, "pc"),
])
def test_null_contents_are_empty_and_content_parts_give_their_text(record, text):
    assert R.jsonl_text(record) == text


@pytest.mark.parametrize("record, says", [
    ({"messages": [{"content": "a"}, {"content": 5}]}, "messages[1].content is 5: expected a string, null or"),
    ({"prompt": "p", "completion": {"x": 1}}, "completion is {'x': 1}: expected"),
    ({"messages": [{"content": [{"type": "text", "text": None}]}]},
     "messages[0].content is [{'text': None, 'type': 'text'}]: expected"),
    ({"messages": [{"content": "a"}, "not a message"]}, "messages[1] is 'not a message': expected a message object"),
    ({"completion": 3}, "completion is 3: expected a string"),
])
def test_other_content_values_are_refused_by_file_and_line(tmp_path, record, says):
    f = tmp_path / "d.jsonl"
    f.write_text('{"text": "fine"}\n' + json.dumps(record) + "\n")
    with pytest.raises(TrainError, match="^" + re.escape(f"{f}:2: {says}")):
        D.read_documents([f])


@pytest.mark.parametrize("line", ['{"text": "a \\ud800"}', '{"messages": [{"content": "x\\udfff"}]}'])
def test_a_lone_surrogate_is_refused_by_file_and_line(tmp_path, line):
    f = tmp_path / "d.jsonl"
    f.write_text('{"text": "fine"}\n' + line + "\n")
    with pytest.raises(TrainError, match=f"{f}:2: the text holds a lone surrogate"):
        D.read_documents([f])


def test_a_binary_jsonl_file_is_refused_and_other_undecodable_files_are_counted(tmp_path):
    (tmp_path / "b.jsonl").write_bytes(b'{"text": "a"}\n\xff\xfe')
    with pytest.raises(TrainError, match=r"b.jsonl: not UTF-8 text \(byte 0xff at offset 14\)"):
        D.read_documents([tmp_path / "b.jsonl"])
    (tmp_path / "bad.txt").write_bytes(b"\xff\xfe\xfa")
    skipped = []
    assert D.read_documents([tmp_path / "bad.txt"], skipped) == [] and skipped == [tmp_path / "bad.txt"]
    job = SimpleNamespace(data=[tmp_path], seq=48)
    assert "1 file skipped (not UTF-8 text): " in str(no_windows(job, skipped, [], [], skipped))


def test_jsonl_lines_without_text_are_counted_by_file_and_line(tmp_path):
    f = tmp_path / "d.jsonl"   # a record of another schema, and an empty one, train on nothing: said, not silent
    f.write_text('{"question": "q", "answer": "a"}\n{"text": ""}\n{"text": "kept"}\n')
    textless = []
    assert D.read_documents([f], textless=textless) == ["kept"] and textless == [f"{f}:1", f"{f}:2"]
    job = SimpleNamespace(data=[tmp_path], seq=48)
    says = str(no_windows(job, [f], [], [], (), textless))
    assert f"2 records without text skipped (no text, prompt, completion, messages or conversations field, or an " \
           f"empty one): {f}:1, {f}:2" in says


def features_job(job, tmp_path, meta_text=None, **kw):
    feats = tmp_path / "feats"
    feats.mkdir(exist_ok=True)
    if meta_text is not None:
        (feats / META).write_text(meta_text)
    return job(tmp_path / "out", features=feats, **kw), feats


BAD_META = {
    "long string": json.dumps({**GOOD_META, "seq": "x" * 20000}),
    "long list": json.dumps({**GOOD_META, "seq": list(range(10000))}),
    "over 64 KiB": json.dumps({**GOOD_META, "seq": list(range(100000))}),
    "deep": '{"seq": ' + "[" * 20000 + "]" * 20000 + "}",
    "garbage": "{bad",
    "5000-digit int": '{"taps": [], "per_shard": 16, "seq": 1' + "0" * 5000 + "}",
    "4000-digit int": '{"taps": [], "per_shard": 16, "seq": 1' + "0" * 4000 + "}",
    "a list": "[1, 2]",
    "a float seq": json.dumps({**GOOD_META, "seq": 48.0}),
    "binary": "\udcff",
}


@pytest.mark.parametrize("name", BAD_META)
def test_a_bad_features_json_is_one_bounded_error_in_preflight_extract_and_the_store(job, tmp_path, name):
    text = BAD_META[name]
    j, feats = features_job(job, tmp_path)
    (feats / META).write_bytes(text.encode("utf-8", "surrogateescape"))
    model = SimpleNamespace(draft=SimpleNamespace(taps=[2, 4, 5]))   # extract reads the file before the target
    for call in (lambda: preflight(j), lambda: extract(model, torch.zeros(2, 48), feats), lambda: FeatureStore(feats)):
        with pytest.raises(TrainError) as e:
            call()
        shard(feats / "shard-00000.safetensors", ids=(), hidden=(8,), top=(), aux=(8,))   # the store needs one
        assert f"{feats / META} is " in str(e.value) and len(str(e.value)) < 1000, str(e.value)[:2000]
    assert (feats / META).read_bytes() == text.encode("utf-8", "surrogateescape")   # nothing lost


def test_features_of_other_taps_are_named_with_the_taps_cut_short(tmp_path):
    (tmp_path / META).write_text(json.dumps({**GOOD_META, "taps": list(range(10000))}))
    model = SimpleNamespace(draft=SimpleNamespace(taps=[2, 4, 5]))
    with pytest.raises(TrainError, match=re.escape(f"{tmp_path} holds features for {{'taps': [0, 1, 2, 3, 4, 5, ...], "
                                                   "'seq': 48, 'per_shard': 16}, not {'taps': [2, 4, 5], 'seq': 48")):
        extract(model, torch.zeros(2, 48), tmp_path)


def shard(path, **tensors):
    save_file({k: torch.zeros(2, 48, *s) for k, s in tensors.items()}, str(path))


@pytest.mark.parametrize("max_windows", [0, None])
@pytest.mark.parametrize("bad, says", [
    (lambda p: p.write_bytes(b"garbage"), "(not safetensors: "),
    (lambda p: shard(p, hidden=(8,), top=(), aux=(8,)), "(no ids)"),
    (lambda p: p.mkdir(), "(not a regular file)"),
    (lambda p: shard(p, ids=(), hidden=(8,), top=()), "(no aux)"),
    (lambda p: save_file({"ids": torch.zeros(2, 47), "hidden": torch.zeros(2, 47, 8), "top": torch.zeros(2, 47),
                          "aux": torch.zeros(2, 47, 8)}, str(p)), "(ids of shape [2, 47], not [windows, 48])"),
    (lambda p: save_file({"ids": torch.zeros(2, 48), "hidden": torch.zeros(3, 48, 8), "top": torch.zeros(2, 48),
                          "aux": torch.zeros(2, 48, 8)}, str(p)),
     "(its features differ in row count or window length)"),
])
def test_an_unreadable_shard_is_named_before_training(job, tmp_path, bad, says, max_windows):
    j, feats = features_job(job, tmp_path, json.dumps(GOOD_META), max_windows=max_windows)
    shard(feats / "shard-00000.safetensors", ids=(), hidden=(8,), top=(), aux=(8,))
    preflight(j)
    bad(feats / "shard-00001.safetensors")
    for call in (lambda: preflight(j), lambda: FeatureStore(feats)):
        with pytest.raises(TrainError, match=f"{feats} holds 1 shard training cannot read: shard-00001.safetensors "
                                             + re.escape(says)):
            call()


@pytest.fixture
def model(tiny, tmp_path):
    from draftsmith.train.draft_io import init_draft

    return init_draft("eagle3-llama", tiny / "target", tmp_path / "d", torch.arange(0, 258, 3))


@pytest.mark.parametrize("state", ["garbage", {"draft": {"x": torch.zeros(1)}, "opt": {}, "step": 3}, [1, 2],
                                   "no step"])
def test_a_trainer_state_that_is_not_one_is_named_with_how_to_start_fresh(model, tmp_path, state):
    out = tmp_path / "d"
    if state == "garbage":
        (out / STATE).write_bytes(b"not a torch file")
    elif state == "no step":
        opt = torch.optim.AdamW(model.draft.parameters())
        torch.save({"draft": model.draft.state_dict(), "opt": opt.state_dict()}, out / STATE)
    else:
        torch.save(state, out / STATE)
    with pytest.raises(TrainError, match=f"{out / STATE} is not a trainer state this draft can resume from .*"
                                         "give --from-draft with this folder and a new --out .* or a new or "
                                         "empty --out to start fresh"):
        train(model, None, out, TrainConfig(steps=1, batch=2))
    assert (out / STATE).is_file()


def test_preflight_refuses_a_trainer_state_that_is_no_torch_archive(job, tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / STATE).write_bytes(b"garbage")
    with pytest.raises(TrainError, match=f"{tmp_path / 'out' / STATE} is not a trainer state"):
        preflight(job(tmp_path / "out"))


@pytest.mark.parametrize("record, says", [
    ({"text": 5}, "text is 5: expected a string or null"),
    ({"text": ["a"]}, "text is ['a']: expected a string or null"),
    ({"prompt": 5, "completion": "c"}, "prompt is 5: expected a string, null or a list of messages"),
    ({"messages": "hi"}, "messages is 'hi': expected a list of messages"),
    ({"conversations": "hi"}, "conversations is 'hi': expected a list of turns"),   # ShareGPT
    ({"conversations": [{"value": "a"}, "b"]}, "conversations[1] is 'b': expected a turn object like "
                                               '{"from": "human", "value": "..."}'),
    ({"conversations": [{"from": "human", "value": 5}]}, "conversations[0].value is 5: expected a string, null or"),
])
def test_a_text_field_of_another_type_is_refused_by_file_and_line(tmp_path, record, says):
    f = tmp_path / "d.jsonl"
    f.write_text('{"text": "fine"}\n' + json.dumps(record) + "\n")
    with pytest.raises(TrainError, match="^" + re.escape(f"{f}:2: {says}")):
        D.read_documents([f])


def test_records_without_a_text_field_or_with_null_text_give_no_document(tmp_path):
    f = tmp_path / "d.jsonl"
    f.write_text('{"id": 1}\n{"text": null}\n{"text": "a"}\n')
    assert D.read_documents([f]) == ["a"]
