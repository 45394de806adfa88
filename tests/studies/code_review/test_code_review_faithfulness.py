"""Faithfulness of the code_review study: slicing goldens, the paper's metric arithmetic, filter semantics,
the line-aware format, the mutant oracle, and the honesty rules (no test MR in training, no mutation log
in the prompts)."""
from __future__ import annotations

import random
from pathlib import Path

import pytest

from icml25.studies.code_review import filters as F
from icml25.studies.code_review import lineformat, review_metrics as RM
from icml25.studies.code_review.diffing import diff
from icml25.studies.code_review.slicing import SLICERS, FileIndex, slice_mr

FIXTURE = Path(__file__).with_name("fixture_slice.cpp")
SRC = FIXTURE.read_text()
D_LINE = 14          # `x = y + 1;` inside `for` / `if`
CALL_LINE = 18       # `int w = helper(x, y);`


def _slice(algo, line=D_LINE):
    (s,) = slice_mr(FileIndex(SRC), [line], algo)
    return set(s)


def _line(text):
    return next(i for i, l in enumerate(SRC.split("\n"), 1) if l.strip() == text)


def test_left_flow_golden():
    s = _slice("left_flow")
    want = {_line("int x = 0;"), _line("x = n * 2;"), _line("for (int i = 0; i < n; ++i) {"),
            _line("if (i > y) {"), D_LINE, 6, 7}
    # declaration and earlier write of x, enclosing loop / if headers, the signature declaring y (OriginalDiff's
    # dependency), nothing unrelated
    assert s == want
    assert _line("int unrelated = 7;") not in s and _line("unrelated = unrelated + 1;") not in s


def test_full_flow_golden():
    lf, ff = _slice("left_flow"), _slice("full_flow")
    assert lf < ff
    assert {_line("int z = y * 3;"), CALL_LINE} <= ff          # later uses of y (and x)
    assert {1, 2} <= ff                                        # the callee `helper`'s signature
    assert _line("int r = q + 1;") not in ff


def test_parent_function_is_the_whole_function_and_original_diff_is_inside_every_slice():
    pf = _slice("parent_function")
    assert pf == set(range(6, 21))
    od = _slice("original_diff")
    assert D_LINE in od and _line("int x = 0;") in od
    for algo in SLICERS:
        assert od <= _slice(algo), algo


def test_slices_are_not_line_windows():
    lf = sorted(_slice("left_flow"))
    assert lf != list(range(lf[0], lf[-1] + 1))   # gaps: statements in between are left out


def test_mr_driver_absorbs_diff_statements_inside_a_slice():
    ix = FileIndex(SRC)
    assert len(slice_mr(ix, [D_LINE, _line("x = n * 2;")], "left_flow")) == 1   # absorbed
    assert len(slice_mr(ix, [D_LINE, _line("int r = q + 1;")], "left_flow")) == 2


@pytest.mark.parametrize("kbi,far,cpi", [(20.00, 75.37, 22.07), (20.00, 43.52, 29.54), (31.11, 87.81, 17.51),
                                         (40.00, 91.21, 14.42), (2.22, 97.58, 2.32)])
def test_metric_arithmetic_reproduces_the_paper(kbi, far, cpi):
    assert round(RM.cpi(kbi, far), 2) == pytest.approx(cpi, abs=0.011)


def test_kbi_far_lsr_on_a_hand_example():
    mrs = [{"key_line": 10, "comments": [{"line": 11, "valid": True}, {"line": 30, "valid": False}]},
           {"key_line": 50, "comments": [{"line": 52, "valid": True}]},    # 2 lines off: a false alarm
           {"key_line": 70, "comments": []}]
    m = RM.score(mrs, tol=1)
    assert m["kbi"] == pytest.approx(100 / 3)
    assert m["far1"] == pytest.approx((50 + 100) / 2)      # MRs with comments
    assert m["far2"] == pytest.approx(50)                   # MRs whose key bug was hit
    assert m["lsr"] == pytest.approx((50 + 100) / 2)
    assert m["cpi1"] == pytest.approx(RM.cpi(100 / 3, 75))


def _c(line, q1, q2, q3, r=0):
    return F.Comment(line, "logic", q1, q2, q3, reviewer=r)


def test_coarse_filter_thresholds():
    cs = [_c(1, 4, 7, 7), _c(2, 7, 4, 7), _c(3, 5, 5, 1), _c(4, 7, 7, 7)]
    assert [c.line for c in F.coarse(cs)] == [3, 4]


def test_top_k_by_severity():
    cs = [_c(i, 7, 7, q3) for i, q3 in enumerate([2, 7, 5, 6, 1])]
    assert [c.line for c in F.top_k(cs, 3)] == [1, 3, 2]


def test_meta_keeps_support_of_two_and_one_reviewer_passes_through():
    a = [_c(10, 6, 6, 6, 0), _c(40, 6, 6, 6, 0)]
    b = [_c(11, 6, 6, 5, 1)]
    c = [_c(80, 6, 6, 7, 2)]
    merged = F.meta_merge([a, b, c])
    assert [(m.line, m.support) for m in merged] == [(10, 2)]
    assert [m.line for m in F.meta_merge([a])] == [10, 40]


def test_validator_applies_the_second_threshold():
    cs = [_c(1, 7, 7, 7), _c(2, 7, 7, 7)]
    kept = F.validate(cs, lambda c: (6, 6, 6) if c.line == 1 else (6, 3, 6))
    assert [c.line for c in kept] == [1]


def test_far_falls_through_the_stages_on_a_synthetic_set():
    rng = random.Random(0)
    key = 100
    per = []
    for r in range(3):
        cs = [_c(key, rng.randint(5, 7), rng.randint(5, 7), rng.randint(5, 7), r)]
        cs += [_c(rng.randint(1, 60), rng.randint(1, 7), rng.randint(1, 7), rng.randint(1, 5), r) for _ in range(12)]
        per.append(cs)
    far = lambda cs: RM.score([{"key_line": key, "comments": [{"line": c.line} for c in cs]}])["far1"]
    coarse = F.coarse(per[0])
    top = F.top_k(coarse, 5)
    meta = F.top_k(F.meta_merge([F.top_k(F.coarse(p), 5) for p in per]), 5)
    val = F.validate(meta, lambda c: (7, 7, 7) if c.line == key else (2, 2, 2))
    seq = [far(per[0]), far(coarse), far(top), far(meta), far(val)]
    assert all(a >= b for a, b in zip(seq, seq[1:])) and seq[0] > seq[-1]


def test_formatter_round_trip_and_marks_agree_with_the_diff():
    old = SRC.split("\n")
    new = list(old)
    new[D_LINE - 1] = new[D_LINE - 1].replace("y + 1", "y + 2")
    new.insert(8, "    // a comment")
    fd = diff(old, new)
    shown = [8, 9, 10, 14, 15, 16]
    text = lineformat.render(new, shown, fd, "inline")
    rows = lineformat.parse(text)
    assert [n for m, n, _ in rows if m != "-"] == shown
    assert {n for m, n, _ in rows if m == "+"} == set(fd.added) & set(shown)
    dels = [(n, t) for m, n, t in rows if m == "-"]
    assert dels == [(D_LINE, old[D_LINE - 1])]           # old-file number of the replaced line
    assert "..." in text
    plain = lineformat.render(new, shown, fd, "none")
    assert not lineformat.parse(plain) and "+    // a comment" in plain


def test_wrong_variable_mutants_swap_same_typed_variables_in_scope_only():
    from icml25.studies.code_review import data_mutants as M

    src = b"""int f(int a, int b, const char* s, const char* t) {
    int c = a + 1;
    if (a < b) {
        int d = 2;
        return c + d;
    }
    c = b;
    long e = c;
    return s[0] + t[0] + e;
}
"""
    got = {(m.line, m.before, m.after) for m in M.mutants(src) if m.op == "wrong_var"}
    # the earliest-named other variable of the same type in scope replaces each read
    assert (2, "a", "b") in got and (7, "b", "a") in got and (5, "c", "a") in got and (9, "s", "t") in got
    assert not any(v == "d" or w == "d" for _, v, w in got)          # d lives in a nested block
    assert not any(ln == 7 and v == "c" for ln, v, _ in got)         # a write target is not a read
    assert not any({v, w} & {"e"} for _, v, w in got)                # no other long in scope
    assert not any(w == "c" and ln <= 2 for ln, _, w in got)         # c is not in scope before its declaration
    for m in M.mutants(src):
        if m.op == "wrong_var":
            assert m.apply(src).decode().split("\n")[m.line - 1] != src.decode().split("\n")[m.line - 1]


# ---- the mutant oracle and the honesty rules, on the bundled minilib ---------------------------

@pytest.fixture(scope="module")
def minilib(tmp_path_factory):
    from icml25.studies.code_review import data_corpus as C
    from icml25.studies.code_review import data_mrs as D

    root = tmp_path_factory.mktemp("cr")
    raw, out = root / "data" / "raw" / "smoke" / "code_review", root / "proc"
    raw.mkdir(parents=True)
    cfg = {"corpus": {"name": "minilib"}, "data_seed": 0,
           "data": {"n_mrs": 6, "max_candidates": 16, "max_per_function": 1, "benign_edits": [2, 3], "test_percent": 30}}
    C.download(cfg, raw)
    meta = D.build(cfg, raw, out)
    return cfg, raw, out, meta


def test_pristine_passes_and_every_kept_mr_compiles_and_fails(minilib):
    from icml25.studies.code_review import data_corpus as C
    from icml25.studies.code_review import data_mrs as D

    cfg, raw, out, meta = minilib
    assert meta["pristine"] == {"passed": 22, "failed": 0}
    s = C.spec(cfg)
    h = C.Harness(out / "corpus", s)
    try:
        assert not h.run((out / "corpus" / s["lib"]).read_text()).killed(s["pristine_pass"])
        for mr in D.load(out):
            # The build keeps a mutant only if every one of its runs (ASLR off) fails; a fresh harness must
            # see the same on every rerun, so a mutant that fails by chance (undefined behaviour) fails this.
            runs = [h.run(mr["text"]) for _ in range(3)]
            assert all(o.compiled for o in runs), mr["id"]
            assert all(o.killed(s["pristine_pass"]) for o in runs), (mr["id"], runs)
            fd, key = mr["fd"], mr["key_line"]
            if mr["op"] in ("null_guard", "missing_break"):   # the deleted lines stand right above the anchor
                assert key not in fd.added and [t for _, t in fd.deleted[key]] == mr["before"].split("\n")[:-1]
            else:                                              # the mutated line is an added line
                assert key in fd.added and mr["after"] in mr["text"].split("\n")[key - 1]
    finally:
        h.close()


def test_a_mutant_that_fails_on_some_runs_only_is_not_a_kill(minilib, monkeypatch):
    from icml25.studies.code_review import data_corpus as C

    cfg, _, out, _ = minilib
    s = C.spec(cfg)
    h = C.Harness(out / "corpus", s, runs=3)
    try:
        lib = (out / "corpus" / s["lib"]).read_text()
        seq = iter([C.Outcome(True, 21, 1), C.Outcome(True, 22, 0), C.Outcome(True, 21, 1)])
        monkeypatch.setattr(h, "_execute", lambda exe: next(seq))
        o = h.run(lib)
        assert o.unstable and not o.killed(s["pristine_pass"])
        seq = iter([C.Outcome(True, crashed=True)] * 3)
        assert h.run(lib).killed(s["pristine_pass"])
    finally:
        h.close()


def test_train_and_test_functions_are_disjoint_and_training_refuses_test_mrs(minilib):
    from icml25.studies.code_review import data_mrs as D
    from icml25.studies.code_review import pipeline as P

    _, _, out, _ = minilib
    mrs = D.load(out)
    tr = {m["function"] for m in mrs if m["split"] == "train"}
    te = {m["function"] for m in mrs if m["split"] == "test"}
    assert tr and te and not tr & te
    with pytest.raises(AssertionError, match="training MRs only"):
        P.training_examples([m for m in mrs if m["split"] == "test"], ["left_flow"], ["inline"], len, 200, 0)


def test_pretraining_text_leaves_out_the_test_functions(minilib):
    from icml25.studies.code_review.study import _pretrain_texts

    _, _, out, meta = minilib
    texts = _pretrain_texts(out)
    lib = (out / "corpus" / "minilib.cpp").read_text()
    assert texts[0] != lib  # the library part, less the test functions (the header keeps their prototypes)
    for fn in meta["test_functions"]:
        assert fn + "(" in lib and fn + "(" not in texts[0]


def test_prompts_do_not_depend_on_the_mutation_log(minilib):
    """The reviewer sees only the MR's code: changing the recorded mutation leaves every prompt the same."""
    from icml25.studies.code_review import data_mrs as D
    from icml25.studies.code_review import pipeline as P

    _, _, out, _ = minilib
    mr = D.load(out, "test")[0]

    class Spy:
        def __init__(self):
            self.prompts = []

        def generate_batch(self, prompts, n=1, temperature=0.0, seed=0):
            self.prompts += prompts
            return [["none"] * n for _ in prompts]

    def prompts(m):
        spy = Spy()
        snips = P.snippets(m, "left_flow", "inline", len, 400)
        P.review(spy, m, snips, 2, 0.8, 0)
        return spy.prompts

    forged = dict(mr, key_line=1, op="lcr", category="security", before="x", after="y", edits=[])
    assert prompts(mr) == prompts(forged) and prompts(mr)
    assert all(str(mr["key_line"]) not in p.split("<|out|>")[1] for p in prompts(mr))


def test_tinyxml2_pristine_passes_its_463_checks(tmp_path):
    """The real mini corpus, where its tarball is already downloaded (DVC cache or a mini run)."""
    from icml25.studies.code_review import data_corpus as C

    s = C.SOURCES["tinyxml2"]
    raw = Path(__file__).resolve().parents[3] / "data" / "raw" / "mini" / "code_review"
    if not (raw / s["orig"]).exists():
        pytest.skip("tinyxml2 source package not downloaded (run the mini download stage)")
    assert C.sha256(raw / s["orig"]) == s["sha256"]
    src = C.extract({"corpus": {"name": "tinyxml2"}}, raw, tmp_path / "src")
    h = C.Harness(src, s)
    try:
        o = h.run((src / s["lib"]).read_text())
    finally:
        h.close()
    assert (o.passed, o.failed) == (463, 0)


# ---- deletion mutants, their anchor, and the new benign edits ----------------------------------

DEL_SRC = b"""int length(const char* s, int n)
{
    if (!s) {
        return 0;
    }
    int k = 0;
    for (int i = 0; i < n; ++i) {
        if (s[i] == 0) {
            k = i;
            break;
        }
    }
    switch (n) {
    case 1:
        k = k + 1;
        break;
    case 2:
        k = k + 2;
    }
    return k;
}
"""


def _deletions(src=DEL_SRC):
    from icml25.studies.code_review import data_mutants as M

    return {(m.op, m.line): m for m in M.mutants(src) if m.deletion}


def test_null_guard_and_missing_break_delete_whole_lines_and_anchor_on_the_line_taking_their_place():
    ms = _deletions()
    assert set(ms) == {("null_guard", 3), ("missing_break", 10), ("missing_break", 16)}
    lines = DEL_SRC.decode().split("\n")
    for (op, ln), m in ms.items():
        new = m.apply(DEL_SRC).decode().split("\n")
        gone = m.last - m.line + 1
        assert new == lines[:ln - 1] + lines[m.last:] and m.before == "\n".join(lines[ln - 1:m.last]) + "\n"
        assert m.new_line(m.last + 1) == ln and new[ln - 1] == lines[m.last]     # the anchor: the next line
        assert m.new_line(ln) is None and m.new_line(ln - 1) == ln - 1 and m.new_line(m.last + 2) == m.last + 2 - gone
    assert ms[("null_guard", 3)].last == 5 and ms[("null_guard", 3)].category == "security"
    # a guard of a name that is no pointer, or an `if` with an else, is no null guard
    assert not _deletions(b"int f(int a, int b) {\n    if (!a) {\n        return 0;\n    }\n    return b;\n}\n")
    # no anchor: a break followed by a blank line, a guard with nothing after it in its block
    assert not _deletions(b"int f(int* a) {\n    while (a) {\n        break;\n\n    }\n    return 1;\n}\n")
    assert not _deletions(b"void f(int* a) {\n    {\n        if (!a) {\n            return;\n        }\n    }\n}\n")
    assert not any(op == "null_guard" for op, _ in _deletions(
        b"int f(int* a) {\n    if (!a) {\n        return 0;\n    } else {\n        a = 0;\n    }\n    return 1;\n}\n"))


def _anchor_mr(op, src=DEL_SRC):
    from icml25.studies.code_review import data_mrs as D
    from icml25.studies.code_review import data_mutants as M

    m = next(m for (o, _), m in _deletions(src).items() if o == op)
    text, key = M.apply_edits(src, [M.Edit("comment", "x", [], [(1, "// header comment")])], m)
    old, new = src.decode().split("\n"), text.split("\n")
    fd = diff(old, new)
    assert D.anchor_ok(m, key, fd, new)
    return m, text, key, fd


def test_the_deletion_anchor_is_the_diffs_deletion_point_and_is_inside_every_slice():
    for op in ("null_guard", "missing_break"):
        m, text, key, fd = _anchor_mr(op)
        assert key == m.line + 1 and key not in fd.added and key in fd.deleted and key in fd.changed
        ix = FileIndex(text)
        sl = {a: [s for s in slice_mr(ix, fd.changed, a) if key in s] for a in SLICERS}
        assert all(len(v) == 1 for v in sl.values()), sl
        od, lf, ff = (set(sl[a][0]) for a in ("original_diff", "left_flow", "full_flow"))
        assert key in od and od <= lf <= ff and lf <= set(sl["parent_function"][0])
        if op == "null_guard":   # the anchor `int k = 0;`: a statement
            assert text.split("\n")[key - 1].strip() == "int k = 0;"
        else:                    # the anchor is the `}` left by the deleted break: it belongs to its `if`
            assert text.split("\n")[key - 1].strip() == "}" and key - 2 in lf   # the `if (s[i] == 0) {` header


def test_kbi_on_a_deletion_is_matched_at_its_anchor_only():
    from icml25.studies.code_review import baselines as B

    m, text, key, fd = _anchor_mr("null_guard")
    mr = {"id": "x", "key_line": key, "fd": fd, "text": text}
    assert key in B.all_added(mr) and key not in fd.added          # the max-recall baseline flags the anchor
    far = [key + 3, 1]                                             # another line of the MR, the header comment
    got = lambda lines: RM.score([{"key_line": key, "comments": [{"line": ln} for ln in lines]}])["kbi"]
    assert got([key]) == 100 and got([key - 1]) == 100             # the anchor, and the line above it (tol 1)
    assert got(far) == 0 and got(fd.added) == 0                    # same file, other lines: no recall


def test_reviewer_target_names_the_deletion_anchor_with_its_unchanged_mark():
    from icml25.studies.code_review import pipeline as P

    m, text, key, fd = _anchor_mr("null_guard")
    mr = {"id": "x", "key_line": key, "fd": fd, "text": text, "category": m.category, "split": "train"}
    (snip,) = [s for s in P.snippets(mr, "left_flow", "inline", len, 4000) if key in s.shown]
    assert key in snip.changed and key not in snip.added
    assert f"-3|    if (!s) {{" in snip.text and f" {key}|    int k = 0;" in snip.text
    assert P.review_target(snip, mr, random.Random(0)).startswith(f" {key}|security|")


EDIT_SRC = b"""int g(int a, int* out)
{
    int b = a * 2;
    int c = a + 1;
    c = c + b;
    int* p = out;
    if (a > b && c != 0) {
        *p = c;
    }
    return b;
}
"""


def test_extract_temporary_and_add_const_goldens():
    from icml25.studies.code_review import cxx
    from icml25.studies.code_review import data_mutants as M

    (fn,) = cxx.functions(cxx.parse(EDIT_SRC))
    ex, co = M.extract_temp_edit(EDIT_SRC, fn), M.add_const_edit(EDIT_SRC, fn)
    new = M.apply_edits(EDIT_SRC, [ex])[0].split("\n")
    assert new[6:8] == ["    const bool cond(a > b && c != 0);", "    if (cond) {"]
    assert M.apply_edits(EDIT_SRC, [co])[0].split("\n")[2] == "    int const b = a * 2;"   # c is written: not c
    ptr = EDIT_SRC.replace(b"int b = a * 2;", b"int b = a;").replace(b"    int const", b"")
    # b written later: the next candidate is the pointer p (never reassigned): `int* const p`
    fn2 = cxx.functions(cxx.parse(ptr.replace(b"return b;", b"b = 1;\n    return b;")))[0]
    co2 = M.add_const_edit(ptr.replace(b"return b;", b"b = 1;\n    return b;"), fn2)
    assert co2.info["name"] == "p"
    assert "int* const p = out;" in M.apply_edits(ptr.replace(b"return b;", b"b = 1;\n    return b;"), [co2])[0]


def test_benign_refactors_keep_minilib_passing_and_an_mr_keeps_its_key_line(minilib):
    from icml25.studies.code_review import data_corpus as C
    from icml25.studies.code_review import data_mrs as D
    from icml25.studies.code_review import data_mutants as M

    cfg, _, out, _ = minilib
    s = C.spec(cfg)
    lib = (out / "corpus" / s["lib"]).read_text()
    src = lib.encode()
    cands = M.refactor_edits(src)
    kinds = [e.kind for es in cands.values() for e in es]
    assert "extract_temp" in kinds and "add_const" in kinds
    h = C.Harness(out / "corpus", s)
    try:
        every = M.apply_edits(src, [e for es in cands.values() for e in es])[0]
        assert every != lib
        o = h.run(every)
        assert o.compiled and (o.passed, o.failed) == (s["pristine_pass"], 0)
        # each deletion mutant of minilib, as an MR with every kind of benign edit: compiles, fails every run
        funcs = M.function_table(src)
        for m in [m for m in M.mutants(src) if m.deletion]:
            for seed in range(4):
                text, key, edits = M.synthesize(src, m, funcs, random.Random(seed), (4, 6), cands)
                new = text.split("\n")
                assert D.anchor_ok(m, key, diff(lib.split("\n"), new), new), (m.op, seed)
            o = h.run(text)
            assert o.compiled and o.killed(s["pristine_pass"]) and not o.unstable, (m.op, o)
    finally:
        h.close()
