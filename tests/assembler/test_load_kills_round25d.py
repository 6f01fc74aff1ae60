"""Mutation survivors of assembler/load.py (round 25d): how many shard files the stale-index note names, and how
many FP8 scale faults the load error lists before 'and N more' (each count written here by hand)."""
import json
import shutil

import pytest
from safetensors.torch import load_file, save_file

import draftsmith
from draftsmith.assembler.plan import CheckpointMismatch
from draftsmith.errors import CheckpointError
from draftsmith.testing import write_eagle1, write_eagle3, write_target
from draftsmith.testing.quant import quantize_folder


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    return write_target(tmp_path_factory.mktemp("load25d") / "t", "llama", num_hidden_layers=2, seed=3)


def _four_shards_hiding_six(folder):
    """model.safetensors as 4 shards (round robin over the sorted names) and an index that leaves out the first
    tensor of each shard and the second of the first two (6 in all); returns (the file names, the tensors left
    out)."""
    tensors = load_file(folder / "model.safetensors")
    names = sorted(tensors)
    files = [f"model-0000{i + 1}-of-00004.safetensors" for i in range(4)]
    parts = {file: names[i::4] for i, file in enumerate(files)}
    for file, part in parts.items():
        save_file({n: tensors[n] for n in part}, folder / file, metadata={"format": "pt"})
    (folder / "model.safetensors").unlink()
    hidden = [part[0] for part in parts.values()] + [parts[files[0]][1], parts[files[1]][1]]
    weight_map = {n: file for file, part in parts.items() for n in part if n not in hidden}
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return files, hidden


def test_the_stale_index_note_names_three_shard_files_and_counts_the_rest(tmp_path):
    """Four shards holding six tensors the index does not list: the note names five of them, then 'and 1 more',
    and the first three files, then 'and 1 more'."""
    target = write_target(tmp_path / "t")
    draft = write_eagle3(tmp_path / "d", target)
    files, hidden = _four_shards_hiding_six(draft)
    with pytest.raises(CheckpointMismatch, match="missing:") as e:
        draftsmith.assemble("eagle3-llama", target=target, draft=draft)
    note = " ".join(e.value.__notes__)
    names = ", ".join(f"'{n}'" for n in sorted(hidden)[:5])
    assert (f"the shards hold 6 tensor(s) the shard index does not list, which no reader sees: {names} and 1 more "
            f"(in {files[0]}, {files[1]}, {files[2]} and 1 more); a stale index?") in note, note


@pytest.fixture(scope="module")
def fp8(target, tmp_path_factory):
    root = tmp_path_factory.mktemp("load25d-fp8")
    draft = write_eagle1(root / "d", target)
    quantize_folder(draft, r"^layers\.0\.", scheme="block", block=(16, 16))
    data = draftsmith.load_spec("eagle1-llama-fp8").model_dump(mode="json")
    data["quant"]["block"] = [16, 16]
    spec = draftsmith.parse_spec(data, source="eagle1-llama-fp8, 16x16 blocks")
    scales = sorted(n for n in load_file(str(draft / "model.safetensors")) if n.endswith("weight_scale_inv"))
    assert len(scales) == 7            # q, k, v, o, gate, up, down of layer 0
    return root, draft, spec, scales


@pytest.mark.parametrize("bad, tail", [(5, ""), (6, "; and 1 more"), (7, "; and 2 more")])
def test_fp8_scale_faults_list_five_then_count_the_rest(target, fp8, bad, tail):
    """`bad` FP8 weight scales made negative: the error lists min(bad, 5) of them and says how many more."""
    root, draft, spec, scales = fp8
    folder = root / f"neg{bad}"
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(draft, folder)
    tensors = load_file(str(draft / "model.safetensors"))
    for name in scales[:bad]:
        tensors[name] = -tensors[name].abs() - 0.01
    save_file(tensors, str(folder / "model.safetensors"))
    with pytest.raises(CheckpointError) as e:
        draftsmith.assemble(spec, target=target, draft=folder, dtype="float32")
    said = str(e.value)
    assert said.count("negative scale(s)") == min(bad, 5), said
    assert said.endswith("the weights would read with their signs flipped" + tail), said


@pytest.mark.parametrize("bad, tail", [(5, ""), (6, " and 1 more tensors"), (7, " and 2 more tensors")])
def test_values_past_the_load_dtype_list_five_tensors_then_count_the_rest(tmp_path, bad, tail):
    """`bad` float32 draft tensors each holding one 1e5 (finite in the file, inf as float16): the error names
    min(bad, 5) of them, each '(1 of its size)', then says how many more tensors."""
    target = write_target(tmp_path / "t")
    draft = write_eagle3(tmp_path / "d", target)
    tensors = load_file(str(draft / "model.safetensors"))
    for name in sorted(tensors)[:bad]:
        tensors[name] = tensors[name].clone()
        tensors[name].view(-1)[0] = 1e5
    save_file(tensors, str(draft / "model.safetensors"))
    with pytest.raises(CheckpointError) as e:
        draftsmith.assemble("eagle3-llama", target=target, draft=draft, dtype="float16")
    said = str(e.value)
    assert said.startswith(f"{draft / 'model.safetensors'}: values past float16's range (largest 65504) in "), said
    assert said.count(" (1 of ") == min(bad, 5), said
    assert said.endswith(f"{tail}: they would load as inf; load it in bfloat16 or float32"), said
    assert ("more tensors" in said) == (bad > 5), said
