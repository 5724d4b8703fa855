"""Issue 39, item 3: capture traces are paired with their replay traces from the roles the workers hand back
(kernlint.trace.pairing.role_of_table), not by reading every trace in the parent first; only the traces the
pairing concerns are read again."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from kernlint.pipeline import CheckRequest, Execution, Inputs, run_check
from kernlint.rules.loader import load_rules
from kernlint.trace import load as trace_load
from kernlint.trace import pairing
from kernlint.trace.load import load_trace

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
GRAPHS = FIXTURES / "traces" / "gpu-graphs"
EXTERNAL = FIXTURES / "external"
PAIRING = FIXTURES / "traces" / "graph-pairing"
VLLM_REPLAY = EXTERNAL / "tracelens__vllm_piecewise__graph_execution.json.gz"
VLLM_CAPTURE = EXTERNAL / "tracelens__vllm_piecewise__graph_capture_rank_0.1773709679453551615.pt.trace.json.gz"
LIMIT = 1 << 30
ROLE_TRACES = [*sorted(GRAPHS.glob("*.json.gz")), VLLM_REPLAY, VLLM_CAPTURE, *sorted(PAIRING.glob("*.json.gz"))]


@pytest.mark.parametrize("path", ROLE_TRACES, ids=[p.name for p in ROLE_TRACES])
def test_a_loaded_trace_has_the_role_its_file_has(path):
    """What a worker hands back from the table it checked is what the light pass reads from the file: whether
    it captures and replays, its rank, processes and start, each capture's launches and each replayed
    sequence."""
    from_file = pairing.graph_role(path, LIMIT)
    from_table = pairing.role_of_table(load_trace(path), path)
    assert dataclasses.asdict(from_table) == dataclasses.asdict(from_file)
    assert from_file.captures or from_file.replays or path.parent == GRAPHS


def _count_reads(monkeypatch) -> list[str]:
    reads: list[str] = []
    real = trace_load.load_trace

    def counted(path, *args, **kwargs):
        reads.append(Path(path).name)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(trace_load, "load_trace", counted)
    return reads


def _outcomes(result) -> list:
    return sorted((r.trace, o.rule, o.status, len(o.findings)) for r in result.reports for o in r.outcomes)


def test_a_folder_is_read_once_and_only_paired_traces_again(monkeypatch):
    """Eight capture/replay files and six others: no light pass in the parent (graph_role is never called),
    each trace read once by its check, and the four pairs' eight traces once more (the replay with its capture,
    the capture outside its windows). The verdicts are those of the pairing made up front (keep_tables)."""
    rules = [r for r in load_rules() if r.id in ("KL001", "KL002", "KL101")]
    files = sorted(GRAPHS.glob("*.json.gz"))
    upfront = run_check(CheckRequest(rules=rules, inputs=Inputs(paths=files), execution=Execution(keep_tables=True)))

    def no_light_pass(*args, **kwargs):
        raise AssertionError("the parent read a trace for pairing")

    monkeypatch.setattr(pairing, "graph_role", no_light_pass)
    reads = _count_reads(monkeypatch)
    result = run_check(CheckRequest(rules=rules, inputs=Inputs(paths=files)))
    paired = {f"graph-{v}{s}-{role}.pt.trace.json.gz" for v in ("new-empty", "new-ones") for s in ("", "-nostack")
              for role in ("replay", "capture")}
    assert sorted(reads) == sorted([p.name for p in files] + sorted(paired))
    assert _outcomes(result) == _outcomes(upfront)
    assert result.notes == upfront.notes and any("attributed with them" in n for n in result.notes)
    assert [f.source for f in result.findings] == [f.source for f in upfront.findings]


def test_a_folder_without_a_pair_is_read_once(monkeypatch):
    reads = _count_reads(monkeypatch)
    files = [GRAPHS / "graph-new-ones-in-window.pt.trace.json.gz",
             GRAPHS / "graph-new-ones-two-stream.pt.trace.json.gz"]
    run_check(CheckRequest(rules=[r for r in load_rules() if r.id == "KL001"], inputs=Inputs(paths=files)))
    assert sorted(reads) == sorted(p.name for p in files)
