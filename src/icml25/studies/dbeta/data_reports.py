"""Machine-report stand-ins and the zero-shot label descriptions.

A report is a few templated findings (synonyms and abbreviations), in random order, with distractor phrases;
each finding is dropped with probability `drop` (label noise: the report misses a finding the signal has).
Zero-shot prompts are worded as context_llm.json's label descriptions, never with a report template: no
template string occurs in a prompt and no prompt in a report (tested).
"""
from __future__ import annotations

import numpy as np

from .data_ecgsyn import LABELS

TEMPLATES = {
    "SR": ["sinus rhythm", "normal sinus rhythm", "nsr", "sinus rhythm with normal rate"],
    "SBRAD": ["sinus bradycardia", "sb", "marked sinus bradycardia", "slow sinus rhythm"],
    "STACH": ["sinus tachycardia", "st", "fast sinus rhythm", "sinus tach"],
    "AFIB": ["atrial fibrillation", "afib", "af with irregular ventricular response", "a-fib"],
    "1AVB": ["1st degree av block", "first degree av block", "prolonged pr interval", "1avb"],
    "BBB": ["bundle branch block", "rbbb", "lbbb", "wide qrs conduction delay", "ivcd with bbb pattern"],
    "TWI": ["t wave inversion", "inverted t waves", "twi", "negative t waves in leads"],
    "STE": ["st elevation", "ste", "st segment elevation", "elevated st segments"],
    "LVOLT": ["low voltage", "low qrs voltage", "lvolt", "low limb lead voltage"],
}
DISTRACTORS = ["no significant change from prior", "compared with previous tracing", "borderline ecg",
               "abnormal ecg", "otherwise normal ecg", "technically adequate tracing", "confirmed by physician",
               "possible artifact", "consider clinical correlation"]
# zero-shot prompts: descriptions in the style of the official configs/context_llm.json, worded differently
PROMPTS = {
    "SR": "regular rhythm of the heart from the sinus node at a normal rate, every p wave followed by a qrs",
    "SBRAD": "slow heart rate under sixty beats per minute while the sinus node still leads the heart",
    "STACH": "fast heart rate over one hundred beats per minute while the sinus node still leads the heart",
    "AFIB": "chaotic fibrillation of the atria: irregularly irregular ventricular beats and no distinct p waves",
    "1AVB": "delayed atrioventricular conduction with a pr interval that is longer than normal",
    "BBB": "blocked conduction in a bundle branch, giving a qrs complex that is broader than normal",
    "TWI": "repolarisation abnormality with downward t waves in several leads",
    "STE": "raised segment after the qrs complex, an elevation above the baseline from myocardial injury",
    "LVOLT": "reduced voltage and small amplitude of the qrs complexes",
}


def report(labels_row, rng, drop: float, n_distract=(0, 2)) -> str:
    parts = []
    for j, on in enumerate(labels_row):
        if on and rng.random() >= drop:
            opts = TEMPLATES[LABELS[j]]
            parts.append(opts[rng.integers(len(opts))])
    k = int(rng.integers(n_distract[0], n_distract[1] + 1))
    parts += [DISTRACTORS[i] for i in rng.choice(len(DISTRACTORS), size=k, replace=False)]
    if not parts:
        parts = [DISTRACTORS[int(rng.integers(len(DISTRACTORS)))]]
    order = rng.permutation(len(parts))
    return ". ".join(parts[i] for i in order) + "."


def reports(labels, rng, drop_range) -> list[str]:
    """One report per record; each record's drop probability is drawn from drop_range (10-20%)."""
    return [report(row, rng, float(rng.uniform(*drop_range))) for row in labels]


def template_strings() -> list[str]:
    return [t for opts in TEMPLATES.values() for t in opts] + list(DISTRACTORS)
