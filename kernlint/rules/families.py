"""Rule families: the table `kernlint rules` groups the rules by, and `kernlint explain` names.

A rule belongs to the family its `family-KEY` tag names (exactly one such tag; a rule without one is in
"other"). R1-R8 are the regression zoo's families (the zoo's cases are tagged `zoo-N`); "distributed" holds
the cross-rank rules and "baseline" the rules that compare a trace with a recorded baseline. Data only: a
new family is one row here, a rule joins it by its tag.

Decided for the first shipped rules: KL001 (fill before 1x128 quant, zoo case 1) is R1; KL002 (the FP8
temporary of dummy weight init, a weight-sized allocation that a cast makes) is R3; KL004 (a host sync on
some ranks only) is R4, its cross-rank form; KL003 (ranks launching different kernels) is "distributed";
KL801-KL807 are "baseline".
"""
from __future__ import annotations

import re
from dataclasses import dataclass

FAMILY_TAG = "family-"
ZOO_TAG = re.compile(r"^zoo-(\d+)$")


@dataclass(frozen=True)
class Family:
    key: str
    title: str
    line: str

    @property
    def label(self) -> str:
        return f"{self.key} {self.title}" if self.key[1:].isdigit() else f"{self.key}: {self.title}"


FAMILIES: tuple[Family, ...] = (
    Family("R1", "dead fill", "a fill whose buffer is fully overwritten before any read"),
    Family("R2", "redundant materialization", "a copy whose only consumer accepts strides or broadcasts"),
    Family("R3", "cast and allocation budget", "casts to a wider float, chained casts, weight-sized "
                                                "allocations every forward"),
    Family("R4", "host sync inside a hot scope", "item / nonzero / DtoH copies / stream syncs inside a step, "
                                                  "sampler or forward"),
    Family("R5", "per-step or pageable H2D uploads", "host tensors uploaded every step, or from pageable memory"),
    Family("R6", "loop-invariant recompute", "work that depends only on parameters and constants, redone "
                                             "every call"),
    Family("R7", "launch budget per layer or per forward", "too many small launches where one fused kernel "
                                                           "would do"),
    Family("R8", "graphability", "syncs inside a region meant for CUDA-graph capture; launches per graph "
                                 "launch"),
    Family("R9", "unfused or layout-bound compute", "eager attention, norms as chains of small kernels, layout "
                                                    "transforms around convolutions"),
    Family("distributed", "cross-rank divergence", "ranks of one run doing different work"),
    Family("baseline", "baseline comparison", "a trace against a recorded baseline of the same program"),
    Family("other", "other rules", "rules without a family tag"),
)
BY_KEY = {f.key: f for f in FAMILIES}


def family_of(tags) -> Family:
    """The family a rule's tags name (the first `family-KEY` tag with a known key), else "other"."""
    for tag in tags:
        if tag.startswith(FAMILY_TAG) and tag[len(FAMILY_TAG):] in BY_KEY:
            return BY_KEY[tag[len(FAMILY_TAG):]]
    return BY_KEY["other"]


def zoo_cases(tags) -> list[int]:
    """The zoo case numbers (zoo.md) a rule's `zoo-N` tags name, sorted."""
    return sorted({int(m.group(1)) for t in tags if (m := ZOO_TAG.match(t))})


def group_rules(rules) -> list[tuple[Family, list]]:
    """The rules grouped by family, in the table's order (R1..R9, distributed, baseline, other), each group
    sorted by id; families without rules are left out."""
    groups: dict[str, list] = {}
    for r in rules:
        groups.setdefault(family_of(r.spec.tags).key, []).append(r)
    return [(f, sorted(groups[f.key], key=lambda r: r.id)) for f in FAMILIES if f.key in groups]


def id_span(ids: list[str]) -> str:
    """How a group's header shows its ids: the hundreds they fall in and how many (`KL8xx, 7 rules`), never
    a whole id, so that a line naming a rule id is that rule's row."""
    hundreds = sorted({f"{i[:3]}xx" for i in ids})
    return f"{', '.join(hundreds)}, {len(ids)} rule{'s' if len(ids) != 1 else ''}"
