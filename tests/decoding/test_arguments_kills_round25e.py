"""Kills for decoding/arguments.py survivors (round 25e): stop_ids' bound on how much of ``stop`` it reads (a stop of
exactly the vocabulary's size is read whole, an iterator at most one id past it)."""
import itertools

import numpy as np
import torch

from draftsmith.decoding.arguments import settings_problems, stop_ids


def test_a_sized_stop_of_exactly_the_vocabulary_is_read():
    """catches arguments.py stop_ids: 'len(stop) > most' -> '>=' (a tuple, range or set of exactly ``most`` ids
    was left unread: a range came back where a list of ids is promised)."""
    assert stop_ids(range(3), 3) == [0, 1, 2]
    assert stop_ids((2, 0), 2) == [2, 0]
    assert stop_ids(range(4), 3) == range(4)   # one more than the vocabulary: left for the checks to refuse


def test_an_iterator_is_read_one_id_past_the_vocabulary_at_most():
    """catches arguments.py stop_ids: 'islice(stop, most + 1)' -> 'most + 2' (an endless or long iterator gave one
    id more than the bound; the checks need only one past ``most`` to say it is too long)."""
    count = itertools.count()
    assert stop_ids(count, 3) == [0, 1, 2, 3]
    assert next(count) == 4   # no more was consumed
    assert settings_problems(4, 0.0, 1.0, 0, None, itertools.count(), vocab=3) == [
        "stop holds more than 3 ids; the vocabulary has 3 tokens"]


def test_a_vector_of_exactly_the_vocabulary_is_read_and_taken():
    """catches arguments.py stop_ids: 'len(stop) <= most' -> '<' for a tensor or array (a 1-D integer vector of
    exactly ``vocab`` ids was left unread, so settings_problems said it 'holds more than 3 ids')."""
    for vector in (torch.tensor([0, 1, 2]), np.array([2, 1, 0])):
        assert stop_ids(vector, 3) == vector.tolist()
        assert type(stop_ids(vector, 3)) is list
        assert settings_problems(4, 0.0, 1.0, 0, None, vector, vocab=3) == []
    assert settings_problems(4, 0.0, 1.0, 0, None, torch.arange(4), vocab=3) == [
        "stop holds more than 3 ids; the vocabulary has 3 tokens"]
