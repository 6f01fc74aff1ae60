"""Mutation survivors of assembler/names.py: the bounds its docstrings state, each checked on both sides."""
import itertools

from draftsmith.assembler.names import Suggester, group_names, natural, quote


def _patterns(names):
    return [p for p, _ in group_names(names)]


def test_names_with_32_number_fields_group_and_with_33_stand_alone():
    # catches names.py:24 _FIELDS = 32 -> 31 / 33
    assert _patterns([f"{'a1.' * 31}a{i}" for i in range(3)]) == [f"{'a1.' * 31}a{{0..2}}"]
    assert len(_patterns([f"{'a1.' * 32}a{i}" for i in range(3)])) == 3


def test_runs_of_18_digits_are_numbers_and_of_19_are_kept_as_written():
    # catches names.py:26 _NUMBER_DIGITS = 18 -> 17 / 19 (a range needs int(); 19 digits are listed as text)
    big = 10**17
    assert _patterns([f"x.{big + i}.w" for i in range(3)]) == [f"x.{{{big}..{big + 2}}}.w"]
    assert _patterns([f"x.{10 * big + i}.w" for i in range(3)]) == [
        "x.{" + ",".join(str(10 * big + i) for i in range(3)) + "}.w"]


def test_digit_runs_of_any_length_sort_as_numbers():
    # catches names.py:_number_key's length written without its own length (9 digits would sort after 10),
    # chr(len(size) + 1) -> + 2 / - 1, and every run past the old 65534-digit cap sorting alike (each pair is in
    # numeric order; the last two were out of order before)
    pairs = [("9", "10"), ("1" * 9, "1" * 10), ("9" * 99, "1" * 100), ("2" * 65533, "1" * 65534),
             ("1" * 65535, "2" * 65536), ("9" * 65535, "1" * 65536), ("9" * 70000, "1" * 100000), ("09", "10")]
    for short, long in pairs:
        assert natural(f"l.{short}") < natural(f"l.{long}") and natural(f"l.{long}") > natural(f"l.{short}")
    assert natural("l.1") < natural("l.1.a") < natural("l.1a") and natural("l.01") < natural("l.1") < natural("l.2")


def test_quote_keeps_200_characters_and_cuts_201_in_the_middle():
    # catches names.py:113 short_text(pattern, 200) -> 199 / 201
    assert quote("a" * 200) == repr("a" * 200)
    assert quote("h" * 100 + "t" * 101) == repr("h" * 98 + "..." + "t" * 98)


def test_names_of_300_characters_are_compared_and_of_301_are_not():
    # catches names.py:141 NAME_CHARS = 300 -> 299 / 301, :153 len(canon) > -> >=, :162 len(name) > -> >=
    assert Suggester({"x" * 300: ("X", (1,))})("x" * 299 + "y", (1,)) == "X"
    assert Suggester({"x" * 301: ("X", (1,))})("x" * 300, (1,)) is None
    assert Suggester({"x" * 300: ("X", (1,))})("x" * 300 + "y", (1,)) is None


def _fillers(n):  # texts with no letter of "ab": nothing like the names asked for below
    return ["".join(p) for p in itertools.islice(itertools.product("vwxyz", repeat=5), n)]


def test_only_the_first_1000_texts_of_a_shape_are_candidates():
    # catches names.py:139 CANDIDATES = 1000 -> 999 / 1001
    for before, found in [(999, "T"), (1000, None)]:
        leftovers = {t: (t, (1,)) for t in _fillers(before)} | {"aaaaaaab": ("T", (1,))}
        assert Suggester(leftovers)("aaaaaaaa", (1,)) == found


def test_a_plan_compares_10000_texts_and_then_stops_suggesting():
    # catches names.py:140 BUDGET = 10000 -> 9999 / 10001, :167 len(texts) <= budget -> <, `and` -> `or`
    suggest = Suggester({"weight": ("W", (1,))})
    asked = ["weight" + "".join(s) for s in itertools.islice(itertools.product("abcdefghijklmnopqrstuvwxyz", repeat=3),
                                                             10001)]
    assert suggest(asked[0], (1,)) == "W" and suggest(asked[0], (1,)) == "W"   # a text asked again costs nothing
    assert [suggest(a, (1,)) for a in asked[1:]] == ["W"] * 9999 + [None]


def test_a_name_holding_nul_stands_alone_beside_a_name_whose_text_it_equals():
    # catches names.py:72 (name, -1) -> (name, 1) ("x\0y" shared the family of "x5y", whose text is "x\0y": a crash)
    assert group_names(["x\0y", "x5y"]) == [("x5y", ["x5y"]), ("x\0y", ["x\0y"])]


def test_two_leftovers_about_as_close_get_no_hint():
    """A checkpoint's ln_in and ln_mid (both [H]) against input_layernorm score 0.69 and 0.72: naming the closer
    one paired the two norms crosswise (post_attention_layernorm got ln_in), and following the hints loaded the
    norms swapped. Alike leftovers give no hint; one clearly closer still does."""
    norms = {"layers.0.ln_in.weight": ("ln_in", (8,)), "layers.0.ln_mid.weight": ("ln_mid", (8,))}
    ask = Suggester(norms)
    assert ask("layers.0.input_layernorm.weight", (8,)) is None
    assert ask("layers.0.post_attention_layernorm.weight", (8,)) is None
    clear = {"layers.0.input_norm.weight": ("input_norm", (8,)), "layers.0.ln_mid.weight": ("ln_mid", (8,))}
    assert Suggester(clear)("layers.0.input_layernorm.weight", (8,)) == "input_norm"
    # a near copy of the name (a prefix added) is named though its siblings are close too
    prefixed = {f"x.layers.0.{p}_proj.weight": (p, (8, 8)) for p in "qkvo"}
    assert Suggester(prefixed)("layers.0.k_proj.weight", (8, 8)) == "k"
    # ... and one under another prefix whose module name is the missing one's
    renamed = {f"blocks.0.attn.{p}_proj.weight": (p, (8, 8)) for p in "qkvo"}
    assert Suggester(renamed)("layers.0.self_attn.k_proj.weight", (8, 8)) == "k"
