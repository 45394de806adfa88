"""RaLU and its baselines as dialogue programs over the LLM interface.

Each solver is a Python generator: it `yield`s a `Request` and receives the `Reply`, so the same code runs
one problem against a scripted fake (tests) or hundreds of problems in lock step against a batched model
(`drive`). A solver returns a dict: the final program(s), counts of units / fixes / tokens, the path.

* `pot`: program of thought, one sampled program.
* `self_consistency`: k sampled programs; the majority of their executed `ans` (vote at evaluation).
* `self_refine`: one judge call on the whole program as a single unit; a WRONG reply's fix replaces it.
* `ralu`: RaLU steps 1-4 (official `RaLU.reason` / `solving`): units by static analysis, the judge
  dialogue per unit with the accept rule (OK and confidence > 51, or no logprobs), rewind-and-correct up to
  `max_branches` times, the most confident branch when nothing is accepted, then synthesis of the final
  program from the aligned reasoning path. Options: `units` (cfg | line | whole), `rewind` (False: accept
  the first fix without re-judging), `judge` (False: no alignment, the initial program is the answer).

Every solver takes `code=None` (math: a program that sets `ans`) or `code={'entry_point': f}` (the code
track: a function from the prompt, its CFG units without the leading definition unit, the code judge and
synthesis prompts of code_task.py); `Task` holds the difference.
"""
from __future__ import annotations

import copy
import re
from dataclasses import dataclass

from . import code_task as CT
from .llm import Reply, Request, confidence
from .units import SOURCES, cfg_units, normalise

SYS_PROGRAM = ("Write a Python program that solves the question and stores the final numeric answer in a "
               "variable named `ans`. Reply with the program only.")
SYS_JUDGE = ("You receive a question and, one at a time, logic units that describe the control flow of a program "
             "meant to solve it. Judge only the current unit. If its logic follows the question, begin your reply "
             "with 'OK'; otherwise begin with 'WRONG' and give the corrected unit wrapped in <Fix></Fix>. End with "
             "'Analysis:' and a short reason.")
SYS_SYNTH = ("You receive a question and a reasoning path of checked logic units. Write the final Python program "
             "that follows the path and stores the answer in `ans`. Reply with the program only.")

_FENCE = re.compile(r"```(?:python)?\n(.*?)```", re.S)
_FIX = re.compile(r"<Fix>(.*?)</Fix>", re.S)


def extract_program(text: str) -> str:
    m = _FENCE.search(text)
    return (m.group(1) if m else text).strip("\n")


def extract_fix(text: str) -> str | None:
    m = _FIX.search(text)
    return m.group(1).strip() if m else None


def analysis_of(text: str) -> str:
    parts = re.split(r"Analysis\s*:", text, maxsplit=1)
    return parts[1].strip() if len(parts) > 1 else ""


def says_ok(text: str) -> bool:
    """Official `check_unit`: the letters of the reply begin with 'ok'."""
    letters = ""
    for ch in text:
        if ch.isalpha():
            letters += ch.lower()
            if len(letters) == 2:
                break
    return letters == "ok"


@dataclass
class Options:
    units: str = "cfg"
    rewind: bool = True
    judge: bool = True
    max_branches: int = 3
    threshold: float = 51.0
    max_program_tokens: int = 96
    max_judge_tokens: int = 80


def _key(seed, pid, *parts) -> str:
    return "|".join(str(x) for x in (seed, pid, *parts))


@dataclass
class Task:
    """What differs between the math track (PoT: a program setting `ans`) and the code track (a function
    named `entry_point`, scored by tests): prompts, program extraction, unit source. `code` is None for math."""
    q: str
    code: dict | None = None

    @property
    def entry_point(self):
        return None if self.code is None else self.code["entry_point"]

    def program_messages(self) -> list:
        if self.code is None:
            return [{"role": "system", "content": SYS_PROGRAM}, {"role": "user", "content": "Question: " + self.q}]
        return [{"role": "system", "content": CT.SYS_PROGRAM},
                {"role": "user", "content": "## Specification\n" + self.q}]

    def judge_state(self) -> list:
        if self.code is None:
            return [{"role": "system", "content": SYS_JUDGE}, {"role": "user", "content": "Question: " + self.q}]
        return [{"role": "system", "content": CT.SYS_JUDGE},
                {"role": "user", "content": "## Specification\n" + CT.clean_spec(self.q)}]

    def synth_messages(self, path_text: str) -> list:
        if self.code is None:
            return [{"role": "system", "content": SYS_SYNTH}, {"role": "user", "content": path_text},
                    {"role": "user", "content": "Question: " + self.q}]
        return [{"role": "system", "content": CT.sys_synth(self.entry_point)},
                {"role": "user", "content": path_text}, {"role": "user", "content": self.q}]

    def extract(self, text: str) -> str:
        return extract_program(text) if self.code is None else CT.extract_code(text, self.entry_point)

    def units(self, source: str, prog: str) -> list[str]:
        # code tasks: CFG units of the function without its leading `[DEFINE FUNCTION] entry_point` unit
        if self.code is not None and source == "cfg":
            return cfg_units(prog, self.entry_point)
        return SOURCES[source](prog)


def _program_request(task: Task, seed, pid, j: int, opt: Options) -> Request:
    return Request("program", task.program_messages(), {"question": task.q}, _key(seed, pid, "program", j),
                   opt.max_program_tokens)


class Tally:
    def __init__(self):
        self.calls = self.out_tokens = self.in_tokens = 0

    def add(self, rep: Reply) -> Reply:
        self.calls += 1
        self.out_tokens += rep.n_out
        self.in_tokens += rep.n_prompt
        return rep


def pot(q: str, seed, pid, opt: Options, code: dict | None = None):
    task, t = Task(q, code), Tally()
    rep = t.add((yield _program_request(task, seed, pid, 0, opt)))
    prog = task.extract(rep.text)
    return {"programs": [prog], "initial": prog, "units": 0, "fixed": 0, "judged": 0, "disagree": None,
            "calls": t.calls, "out_tokens": t.out_tokens, "in_tokens": t.in_tokens}


def self_consistency(q: str, seed, pid, opt: Options, k: int = 5, code: dict | None = None):
    task, t = Task(q, code), Tally()
    progs = []
    for j in range(k):
        rep = t.add((yield _program_request(task, seed, pid, j, opt)))
        progs.append(task.extract(rep.text))
    return {"programs": progs, "initial": progs[0], "units": 0, "fixed": 0, "judged": 0, "disagree": None,
            "calls": t.calls, "out_tokens": t.out_tokens, "in_tokens": t.in_tokens}


def self_refine(q: str, seed, pid, opt: Options, code: dict | None = None):
    """Whole-program self-refine: the judge sees the program as one unit; WRONG + fix replaces it."""
    task, t = Task(q, code), Tally()
    rep = t.add((yield _program_request(task, seed, pid, 0, opt)))
    prog = task.extract(rep.text)
    unit = SOURCES["whole"](prog)
    final, fixed = prog, 0
    if unit:
        msgs = task.judge_state() + [{"role": "user", "content": "## Process\nUnit 1: " + unit[0]}]
        rep = t.add((yield Request("judge", msgs, {"question": q, "unit": unit[0]}, _key(seed, pid, "refine", 0),
                                   opt.max_program_tokens + 16)))
        fix = extract_fix(rep.text)
        if not says_ok(rep.text) and fix is not None and normalise(fix) != normalise(unit[0]):
            final, fixed = unit_to_program(fix), 1
    return {"programs": [final], "initial": prog, "units": 1 if unit else 0, "fixed": fixed, "judged": 1 if unit else 0,
            "disagree": None, "calls": t.calls, "out_tokens": t.out_tokens, "in_tokens": t.in_tokens}


def unit_to_program(unit: str) -> str:
    """The program inside a whole-program RUN unit."""
    s = unit.strip()
    if s.startswith("RUN [") and s.endswith("]"):
        return s[len("RUN ["):-1].strip("\n")
    if s.startswith("RUN `") and s.endswith("`"):
        return s[len("RUN `"):-1]
    return s


def judge_unit(q, state, unit_idx, unit, seed, pid, branch, opt: Options, tally: Tally):
    """One judge call on `unit` (official `get_valid_response` with max_valid_num = 1).

    Returns (accepted, fix, prompt, reply, score). A WRONG reply whose fix equals the unit counts as OK
    (official `check_unit`). Departure: an OK below the confidence threshold, or a WRONG reply without a
    parseable fix, is a rejected branch whose 'fix' is the unit itself (official code retries, then fails)."""
    prompt = f"Unit {unit_idx + 1}: {unit}"
    if unit_idx == 0:
        prompt = "## Process\n" + prompt
    msgs = state + [{"role": "user", "content": prompt}]
    rep = tally.add((yield Request("judge", msgs, {"question": q, "unit": unit},
                                   _key(seed, pid, "judge", opt.units, unit_idx, branch), opt.max_judge_tokens)))
    score = confidence(rep)
    fix = extract_fix(rep.text)
    ok = says_ok(rep.text) or (fix is not None and normalise(fix) == normalise(unit))
    if ok and (score > opt.threshold or score < 0):
        return True, None, prompt, rep, score
    return False, (fix if (fix is not None and not ok) else unit), prompt, rep, score


def ralu(q: str, seed, pid, opt: Options, code: dict | None = None):
    task, t = Task(q, code), Tally()
    rep = t.add((yield _program_request(task, seed, pid, 0, opt)))
    prog = task.extract(rep.text)
    if not opt.judge:  # the leak / identity check: without the judge RaLU is PoT
        return {"programs": [prog], "initial": prog, "units": 0, "fixed": 0, "judged": 0, "disagree": None,
                "calls": t.calls, "out_tokens": t.out_tokens, "in_tokens": t.in_tokens, "path": [], "branch_scores": []}
    units = task.units(opt.units, prog)
    state = task.judge_state()
    path, fixed, all_scores = [], 0, []
    for i, unit in enumerate(units):
        cur, branches, accepted = unit, [], False
        for b in range(opt.max_branches + 1):
            ok, fix, prompt, rep, score = yield from judge_unit(q, state, i, cur, seed, pid, b, opt, t)
            new_state = state + [{"role": "user", "content": prompt}, {"role": "assistant", "content": rep.text}]
            if ok:
                state, accepted = new_state, True
                path.append((cur, analysis_of(rep.text)))
                break
            branches.append({"state": new_state, "score": score, "unit": cur, "analysis": analysis_of(rep.text)})
            if not opt.rewind:  # ablation: take the first fix as the unit, no re-judging
                state, accepted = new_state, True
                path.append((fix, analysis_of(rep.text)))
                break
            # rewind (official branch_off): the next branch starts from `state`, i.e. without this exchange
            cur = fix
        if not accepted:
            scores = [br["score"] for br in branches]
            best = max(range(len(branches)), key=lambda j: scores[j]) if max(scores) > 0 else 0
            state = branches[best]["state"]
            path.append((branches[best]["unit"], branches[best]["analysis"]))
        all_scores.append([br["score"] for br in branches])
        if normalise(path[-1][0]) != normalise(unit):
            fixed += 1
    msgs = task.synth_messages("# Reasoning Path\n" + "\n\n".join(f"{u}\n{a}" for u, a in path))
    rep = t.add((yield Request("synth", msgs, {"question": q, "path": [u for u, _ in path]},
                               _key(seed, pid, "synth", opt.units), opt.max_program_tokens)))
    final = task.extract(rep.text)
    disagree = [normalise(u) for u in task.units(opt.units, final)] != [normalise(u) for u, _ in path]
    return {"programs": [final], "initial": prog, "units": len(units), "fixed": fixed, "judged": len(units),
            "disagree": float(disagree), "calls": t.calls, "out_tokens": t.out_tokens, "in_tokens": t.in_tokens,
            "path": [u for u, _ in path], "branch_scores": all_scores, "final_state": copy.deepcopy(state)}


def drive(gens: list, llm) -> list:
    """Run solver generators in lock step: every round, the pending requests of all problems go to the LLM
    in one batch."""
    results, pending = [None] * len(gens), {}
    for i, g in enumerate(gens):
        try:
            pending[i] = next(g)
        except StopIteration as e:
            results[i] = e.value
    while pending:
        ids = list(pending)
        replies = llm.generate([pending[i] for i in ids])
        nxt = {}
        for i, rep in zip(ids, replies):
            try:
                nxt[i] = gens[i].send(rep)
            except StopIteration as e:
                results[i] = e.value
        pending = nxt
    return results


# method name -> (solver, options)
def solver_for(method: str, cfg: dict):
    r = cfg["ralu"]
    base = dict(max_branches=int(r["max_branches"]), threshold=float(r["threshold"]),
                max_program_tokens=int(cfg["generation"]["max_program_tokens"]),
                max_judge_tokens=int(cfg["generation"]["max_judge_tokens"]))
    if method == "pot":
        return pot, Options(**base), {}
    if method == "pot_sc":
        return self_consistency, Options(**base), {"k": int(cfg["baselines"]["sc_k"])}
    if method == "self_refine":
        return self_refine, Options(**base), {}
    if method == "ralu":
        return ralu, Options(units="cfg", **base), {}
    if method == "ralu_line":
        return ralu, Options(units="line", **base), {}
    if method == "ralu_norewind":
        return ralu, Options(units="cfg", rewind=False, **base), {}
    raise KeyError(method)
