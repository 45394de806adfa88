"""The code track's prompts and parsing (official `run_code`, `RaLU.coding`, `clean_spec`,
`extract_program`; our wording, same roles and formats).

Initial program: system "expert in Python, wrap the program in <code></code>, no test cases", user
"## Specification\\n<prompt>". Judge dialogue: the code judge system prompt (instructions/RaLU/code.txt in
spirit) and "## Specification\\n<clean spec>" as the first user turn. Synthesis: "# Reasoning Path ..." then
the specification; the program must define the entry point. The judge never sees tests or a canonical
solution: they are not in the question row at all (data.preprocess).
"""
from __future__ import annotations

import re

SYS_PROGRAM = ("You are an expert in Python coding. Wrap your program in a <code></code> block. "
               "No test cases or any other contents.")
SYS_JUDGE = (
    "You will receive a specification and, one at a time, logic units that describe the control flow of a "
    "Python function meant to implement it. Markers wrapped in '#', such as #ENTER FUNCTION# or #BRANCH#, are "
    "structure, never errors. For each unit: judge only the current unit and only its logic (ignore syntax). "
    "If it follows the specification, begin your reply with 'OK'; otherwise begin with 'WRONG' and give the "
    "corrected unit, in the same unit format, wrapped in <Fix></Fix>. Then write 'Analysis:' and explain why "
    "the unit is logically correct or wrong with respect to the part of the specification it serves.")


def sys_synth(entry_point: str) -> str:
    return ("You are an expert in Python coding. Write a correct program that follows the given reasoning path. "
            f"It may contain several functions, but its main entry point must be `{entry_point}`. Return the "
            "complete program wrapped in a <code></code> block, then 'Analysis:' and a short explanation. "
            "No test cases.")


def clean_spec(spec: str) -> str:
    """The judge's view of a prompt (official `clean_spec`): the docstring text, the stock 'Write a function
    to' phrasing dropped, and the signature line as 'Format of Target Function: name(args) -> type'."""
    sig = ""
    for line in spec.splitlines():
        if line.lstrip().startswith("def "):
            sig = "\n" + "Format of Target Function: " + line.strip()[len("def "):].rstrip(":").strip()
            break
    docs = re.findall(r'"""(.*?)"""', spec, re.S)
    text = "\n".join(d.strip() for d in docs) if len(docs) == 1 else spec
    for stock in ("Write a function to", "Write a python function to", "Write a function that"):
        text = text.replace(stock, "").strip()
    return text + sig


_CODE = re.compile(r"<\s*code\s*>(.*?)<\s*/\s*code\s*>", re.S | re.I)
_FENCE = re.compile(r"```[a-zA-Z0-9]*\n(.*?)```", re.S)


def extract_code(text: str, entry_point: str) -> str:
    """The program in a reply: a <code> block, else the last ``` fence, else the text from `def` on. When
    the entry point is not defined, a lower-case spelling or the first `def` is renamed to it (official
    `extract_program`). Always returns a string (possibly not a valid program: the tests then fail)."""
    m = _CODE.search(text)
    if m:
        prog = m.group(1)
    else:
        fences = _FENCE.findall(text)
        if fences:
            prog = fences[-1]
        else:
            k = text.find("def ")
            prog = text[k:] if k >= 0 else text
    prog = prog.strip("\n")
    defined = re.compile(rf"def\s+{re.escape(entry_point)}\s*\(")
    if not defined.search(prog):
        if entry_point.lower() != entry_point and entry_point.lower() in prog:
            prog = prog.replace(entry_point.lower(), entry_point)
        if not defined.search(prog):
            prog = re.sub(r"def\s+[A-Za-z_][A-Za-z0-9_]*\s*\(", f"def {entry_point}(", prog, count=1)
    return prog
