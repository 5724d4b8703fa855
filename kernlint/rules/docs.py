"""A rule's documentation as one markdown page (what `kernlint explain` prints, docs/rules/KLnnn.md holds and
SARIF's help carries), with its references as links where they name a public change."""
from __future__ import annotations

import re

from kernlint.rules.families import family_of, zoo_cases

# The projects rule references cite, by the name they are cited with: "vLLM PR 43677" -> its pull request.
PROJECT_REPOSITORIES = {
    "vLLM": "vllm-project/vllm", "SGLang": "sgl-project/sglang", "TensorRT-LLM": "NVIDIA/TensorRT-LLM",
    "TransformerEngine": "NVIDIA/TransformerEngine", "Megatron-LM": "NVIDIA/Megatron-LM",
    "Liger-Kernel": "linkedin/Liger-Kernel", "PyTorch": "pytorch/pytorch", "ROCm aiter": "ROCm/aiter",
    "transformers": "huggingface/transformers",
}
_CITED = re.compile(r"^(?P<project>" + "|".join(map(re.escape, sorted(PROJECT_REPOSITORIES, key=len, reverse=True)))
                    + r") (?P<kind>PR|issue) (?P<number>\d+)\b")
# Where the rule pages live in the repository, relative to its root.
RULE_PAGES = "docs/rules"


def reference_url(reference: str) -> str | None:
    """The URL a reference names: itself when it is one, a project's pull request or issue, else None."""
    if reference.startswith("https://"):
        return reference.split()[0]
    m = _CITED.match(reference)
    if m is None:
        return None
    path = "pull" if m["kind"] == "PR" else "issues"
    return f"https://github.com/{PROJECT_REPOSITORIES[m['project']]}/{path}/{m['number']}"


def reference_line(reference: str) -> str:
    """A reference with its link (a markdown autolink, readable in a terminal too)."""
    url = reference_url(reference)
    return reference if url is None or url == reference else f"{reference} <{url}>"


def rule_markdown(rule) -> str:
    d = rule.spec.docs
    family = family_of(rule.spec.tags)
    cases = zoo_cases(rule.spec.tags)
    lines = [f"# {rule.id} {rule.name} ({rule.severity})", f"Family: {family.label}",
             # The regression zoo's case numbers (its notes are not shipped: no file to cite; the upstream
             # fixes are the References).
             f"Zoo cases: {', '.join(map(str, cases))}" if cases else "Zoo cases: none", "",
             rule.spec.summary, "",
             "## What it does", d.what_it_does.strip(), "",
             "## Why is this bad?", d.why_is_this_bad.strip(), "",
             "## Example", "```python", d.example.strip(), "```", "",
             "## Use instead", "```python", d.use_instead.strip(), "```", "",
             "## References", *[f"- {reference_line(ref)}" for ref in d.references]]
    return "\n".join(lines) + "\n"
