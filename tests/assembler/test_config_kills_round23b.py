"""Kills for assembler/config.py survivors (round 23b): unread_sizes, said after missing_sizes' message, lists at most
six unread whole-number keys ('and N more' for the rest) and cuts each 'key: value' past 300 characters."""
from draftsmith.assembler.config import missing_sizes

TAIL = ", which nothing reads: if these are its sizes under another model's names, rename them"


def said(**extra) -> str:
    """What missing_sizes says after its own sentence for a config without hidden_size or heads."""
    message = missing_sizes({"vocab_size": 96, **extra})
    assert message.endswith(TAIL), message
    return message[message.index("; it has ") + len("; it has "):-len(TAIL)]


def test_six_unread_keys_are_listed_and_the_rest_counted():
    assert said(**{f"a_{i}": i for i in range(1, 7)}) == "a_1: 1, a_2: 2, a_3: 3, a_4: 4, a_5: 5, a_6: 6"
    assert said(**{f"a_{i}": i for i in range(1, 8)}) == "a_1: 1, a_2: 2, a_3: 3, a_4: 4, a_5: 5, a_6: 6 and 1 more"


def test_a_key_and_value_of_300_characters_is_said_whole_and_a_longer_one_cut():
    whole = "k" * 297          # 'k...k: 7': 300 characters
    assert said(**{whole: 7}) == f"{whole}: 7"
    longer = "k" * 298         # 301 characters: cut in the middle to 300
    assert said(**{longer: 7}) == "k" * 148 + "..." + "k" * 145 + ": 7"
