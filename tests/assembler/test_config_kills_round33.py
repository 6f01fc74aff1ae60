"""Mutation round 33 (config.unread_eps): the small positive floats named as a possible norm epsilon are those in
(0, 0.01], at most four of them (then 'and N more'), each cut to 300 characters."""
from draftsmith.assembler.config import unread_eps


def _said(**flat) -> str:
    return unread_eps(flat, flat)


def test_zero_is_no_epsilon_and_a_hundredth_is_one():
    assert _said(attention_dropout_x=0.0) == ""
    assert _said(norm_eps=0.01).startswith("; the config has norm_eps: 0.01, which nothing reads: if that is")
    assert _said(norm_eps=0.0100001) == ""


def test_four_are_named_then_the_count_of_the_rest():
    got = _said(**{f"eps_{i}": 1e-5 for i in range(5)})
    assert "eps_3: 1e-05 and 1 more, which nothing reads: if one is its" in got, got
    got = _said(**{f"eps_{i}": 1e-5 for i in range(4)})
    assert "eps_0: 1e-05, eps_1: 1e-05, eps_2: 1e-05, eps_3: 1e-05, which" in got and "more" not in got, got


def test_each_is_cut_past_300_characters():
    whole = "e" * (300 - len(": 1e-05"))   # 'eee...: 1e-05' is 300 characters: said whole
    assert f"; the config has {whole}: 1e-05, which" in _said(**{whole: 1e-5})
    longer = whole + "f"   # 301: cut in the middle to 148 + '...' + 148
    got = _said(**{longer: 1e-5})
    assert f"; the config has {'e' * 148}...{'e' * 140}f: 1e-05, which nothing reads" in got, got
