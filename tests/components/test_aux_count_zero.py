"""A draft config's num_aux_hidden_states of 0 is refused as the count it is not (mutation round 30): its message says
'an integer in 1..', -1 was refused, but 0 passed and was read as absent (len(ids), else 3), silently; the spec's
own num_aux is >= 1. Catches eagle3_config.py aux_count_fault's '0 <= value' (the mutants 0 < / 1 <= survived)."""
from draftsmith import limits
from draftsmith.assembler.config_values import fusion_value_problems
from draftsmith.components.eagle3_config import aux_count_fault


def test_a_zero_aux_count_is_refused_and_one_is_a_count():
    assert aux_count_fault(0) and aux_count_fault(-1)
    assert not aux_count_fault(1) and not aux_count_fault(limits.TARGET_LAYERS + 1)
    assert aux_count_fault(limits.TARGET_LAYERS + 2)
    assert fusion_value_problems({"eagle_aux_hidden_state_layer_ids": [2, 4, 5], "num_aux_hidden_states": 0}) == [
        f"num_aux_hidden_states is 0; an integer in 1..{limits.TARGET_LAYERS + 1} is expected"]
