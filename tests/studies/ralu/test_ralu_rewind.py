"""RaLU's dialogue semantics against a scripted fake LLM (test only): rewind-and-correct, the accept rule,
the most confident branch, the no-rewind ablation, and self-consistency's vote."""
from __future__ import annotations

import math

from icml25.studies.ralu import methods as M
from icml25.studies.ralu.llm import Reply, confidence
from icml25.studies.ralu.study import vote


class Scripted:
    """Replies in order; each a (text, per-token probability) pair. Records every request."""

    def __init__(self, replies):
        self.replies = list(replies)
        self.requests = []

    def generate(self, reqs):
        out = []
        for r in reqs:
            self.requests.append(r)
            text, p = self.replies.pop(0)
            n = max(1, len(text.split()))
            out.append(Reply(text, [math.log(p)] * n, 10, n))
        return out


Q = "Tom has 3 apples ."
PROG = "apples = 3\nans = apples"  # one CFG unit: RUN [ ... ]
UNIT = "RUN [\napples = 3\nans = apples\n]"


def _run(replies, **opt):
    llm = Scripted(replies)
    (res,) = M.drive([M.ralu(Q, 0, "p0", M.Options(**opt))], llm)
    return res, llm


def test_wrong_fix_then_ok_keeps_the_corrected_unit_and_drops_the_wrong_exchange():
    fix = "RUN [\napples = 4\nans = apples\n]"
    res, llm = _run([(PROG, 0.9), (f"WRONG <Fix>{fix}</Fix> Analysis: bad count", 0.8),
                     ("OK Analysis: fine", 0.9), ("apples = 4\nans = apples", 0.9)])
    assert res["path"] == [fix]
    assert res["fixed"] == 1
    second = llm.requests[2]  # the re-prompt after the rewind
    assert second.messages[-1]["content"] == "## Process\nUnit 1: " + fix
    assert [m["role"] for m in second.messages] == ["system", "user", "user"]  # branch_off dropped the exchange
    state = [m["content"] for m in res["final_state"] if m["role"] != "system"]
    assert not any("WRONG" in c for c in state) and state[-1] == "OK Analysis: fine"
    assert llm.requests[-1].kind == "synth" and llm.requests[-1].fields["path"] == [fix]
    assert res["programs"] == ["apples = 4\nans = apples"] and res["disagree"] == 0.0


def test_always_wrong_gives_max_branches_plus_one_scores_and_the_most_confident_wins():
    fixes = [f"RUN [\napples = {k}\nans = apples\n]" for k in (5, 6, 7, 8)]
    probs = [0.6, 0.95, 0.7, 0.5]  # branch 1 (which judged fixes[0]) is the most confident
    replies = [(PROG, 0.9)] + [(f"WRONG <Fix>{f}</Fix> Analysis: no", p) for f, p in zip(fixes, probs)] + [("x", 0.9)]
    res, llm = _run(replies, max_branches=3)
    assert len(res["branch_scores"][0]) == 4
    assert [round(s, 6) for s in res["branch_scores"][0]] == [round(100 * p, 6) for p in probs]
    judged = [r.fields["unit"] for r in llm.requests if r.kind == "judge"]
    assert judged == [UNIT] + fixes[:3]  # branch k judges the fix of branch k-1; the last fix is never judged
    assert res["path"] == [fixes[0]]  # the unit of the most confident branch
    # its kept state ends with that branch's exchange, and holds no other branch's
    assert res["final_state"][-2]["content"].endswith(fixes[0])
    assert sum(m["role"] == "assistant" and "WRONG" in m["content"] for m in res["final_state"]) == 1


def test_accept_rule_needs_confidence_above_51():
    # OK at 40% confidence is not accepted: the unit is re-judged (as its own 'fix') until a confident OK
    res, llm = _run([(PROG, 0.9), ("OK Analysis: fine", 0.4), ("OK Analysis: fine", 0.9), ("y", 0.9)])
    assert sum(r.kind == "judge" for r in llm.requests) == 2
    assert res["path"] == [UNIT] and res["fixed"] == 0
    # a WRONG whose fix equals the unit counts as OK (official check_unit)
    res, llm = _run([(PROG, 0.9), (f"WRONG <Fix>{UNIT}</Fix> Analysis: same", 0.9), ("y", 0.9)])
    assert sum(r.kind == "judge" for r in llm.requests) == 1 and res["fixed"] == 0


def test_no_rewind_takes_the_first_fix_and_no_judge_is_pot():
    fix = "RUN [\napples = 4\nans = apples\n]"
    res, llm = _run([(PROG, 0.9), (f"WRONG <Fix>{fix}</Fix> Analysis: bad", 0.3), ("z", 0.9)], rewind=False)
    assert res["path"] == [fix] and sum(r.kind == "judge" for r in llm.requests) == 1
    res, llm = _run([(PROG, 0.9)], judge=False)
    (pot,) = M.drive([M.pot(Q, 0, "p0", M.Options())], Scripted([(PROG, 0.9)]))
    assert res["programs"] == pot["programs"] == [PROG] and len(llm.requests) == 1
    assert llm.requests[0].key == "0|p0|program|0"  # the same sampling stream as PoT's program


def test_confidence_and_vote():
    assert confidence(Reply("x", [math.log(0.5), math.log(1.0)])) == 75.0
    assert confidence(Reply("x", None)) == -1.0  # no logprobs: every OK is accepted
    assert vote([None, 3.0, 2.0, 3.0000000001, 2.0]) == 3.0
    assert vote([None, None]) is None
