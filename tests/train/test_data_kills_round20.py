"""Kills for train/data.py survivors (round 20): a record file that is not UTF-8 names its own format."""
import pytest

from draftsmith.train import data as D
from draftsmith.train.checks import TrainError


@pytest.mark.parametrize("suffix, kind", [(".jsonl", "so not JSONL"), (".json", "so not JSON")])
def test_a_record_file_that_is_not_utf8_names_its_format(tmp_path, suffix, kind):
    f = tmp_path / f"data{suffix}"
    f.write_bytes(b'{"text": "caf\xe9"}\n')
    with pytest.raises(TrainError) as e:
        D.read_documents([f])
    said = str(e.value)
    assert "not UTF-8 text (byte 0xe9 at offset 13)" in said and said.rstrip().endswith(kind), said
