"""Severity follows cost (issue 37, item 2): a cause costing less than its rule's min-cost a step is info with
the context "negligible (x µs, y% of the step)"; structural, cross-rank and baseline rules never are; the
costliest causes come first; `[min-cost]` in a config moves the line."""
from __future__ import annotations

import json
import textwrap

import pytest
from click.testing import CliRunner

from conftest import FIXTURES
from kernlint.api import check, resolve_rules
from kernlint.config import load_config
from kernlint.errors import ConfigError
from kernlint.rules.causes import causes_of
from kernlint.rules.negligible import DEFAULT_MIN_SHARE, StepCost, is_negligible, min_cost_of
from kernlint.rules.schema import MinCostSpec

RESNET = FIXTURES / "external" / "kineto__resnet50_num_workers_0__worker0.1623143089861.pt.trace.json.gz"
PLACEHOLDER = FIXTURES / "traces" / "gpu-graphs" / "graph-new-ones-in-window.pt.trace.json.gz"
CPU_ITEM = FIXTURES / "traces" / "cpu-costly" / "eager-attention.pt.trace.json.gz"


def invoke(*args):
    from kernlint.cli import main

    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def resnet():
    return check(str(RESNET), select=["KL401", "KL501"])


def test_a_sync_worth_03_percent_of_the_step_is_info_and_the_upload_worth_2_percent_stays(resnet):
    syncs = [f for f in resnet.findings if f.rule == "KL401"]
    uploads = [f for f in resnet.findings if f.rule == "KL501"]
    assert len(syncs) == 12 and len(uploads) == 12
    # The decision is the cause's: its instances summed per step, against the share of that step.
    per_step: dict[str, list[float]] = {}
    for f in syncs:
        us, share = per_step.get(f.details["step"], [0.0, 0.0])
        per_step[f.details["step"]] = [us + f.cost.us, share + f.cost.share]
    assert max(share for _, share in per_step.values()) < DEFAULT_MIN_SHARE
    assert {f.severity for f in syncs} == {"info"} and all(f.context.startswith("negligible (") for f in syncs)
    assert all(f.details["severity_before"] == "error" for f in syncs)
    us, share = max(per_step.values())   # the costliest step is what the context says
    assert syncs[0].context == f"negligible ({us:.1f} µs, {100 * share:.2g}% of the step)"
    upload_steps: dict[str, float] = {}
    for f in uploads:   # the images' copy and the labels' (0.007%): one cause, 2.2% a step
        upload_steps[f.details["step"]] = upload_steps.get(f.details["step"], 0.0) + f.cost.share
    assert min(upload_steps.values()) > DEFAULT_MIN_SHARE and {f.severity for f in uploads} == {"error"}
    assert resnet.rule_status("KL401") == "passed" and resnet.rule_status("KL501") == "failed"
    assert resnet.exit_code == 1


def test_the_costliest_cause_comes_first(resnet):
    causes = causes_of(resnet)
    assert [c.rule for c in causes] == ["KL501", "KL401"]   # an error before an info; then by cost
    costs = [c.cost.us for c in causes if c.severity == "info"]
    assert costs == sorted(costs, reverse=True)


def test_a_config_min_cost_of_zero_keeps_every_finding_at_its_severity(tmp_path):
    config = tmp_path / "kernlint.toml"
    config.write_text("[min-cost]\nshare = 0.0\nus = 0.0\n")
    data = json.loads(invoke("check", RESNET, "--select", "KL401", "--config", config, "--format", "json").output)
    assert {f["severity"] for f in data["findings"]} == {"error"} and data["exit_code"] == 1
    # per rule, over the global values, by name too
    config.write_text('[min-cost]\nshare = 0.0\nhost-sync-in-hot-scope = { share = 0.01 }\n')
    data = json.loads(invoke("check", RESNET, "--select", "KL401", "--config", config, "--format", "json").output)
    assert {f["severity"] for f in data["findings"]} == {"info"}


def test_the_cli_and_the_api_agree(tmp_path):
    data = json.loads(invoke("check", RESNET, "--select", "KL401,KL501", "--format", "json", "--isolated").output)
    by_rule = {(f["rule"], f["severity"], f["context"]) for f in data["findings"]}
    api = {(f.rule, f.severity, f.context) for f in check(str(RESNET), select=["KL401", "KL501"]).findings}
    assert by_rule == api


def test_structural_rules_keep_their_severity_whatever_they_cost():
    result = check(str(PLACEHOLDER), select=["KL001"])
    fills = result.findings
    assert fills and all(f.cost.us < 5 for f in fills)   # about a microsecond a fill
    assert {f.severity for f in fills} == {"error"} and not any(f.context for f in fills)
    rules = {r.id: r for r in resolve_rules(None)}
    assert {i for i, r in rules.items() if min_cost_of(r) is None} >= {"KL001", "KL002", "KL003", "KL004", "KL491",
                                                                        "KL801", "KL808"}


def test_a_cost_measured_on_the_host_of_a_cpu_trace_never_makes_a_finding_negligible():
    result = check(str(CPU_ITEM), select=["KL901"])
    assert result.findings and all(f.cost.basis == "host time" for f in result.findings)
    assert {f.severity for f in result.findings} == {"warning"}


def test_negligible_means_below_the_floor_or_the_share_in_every_step():
    limit = MinCostSpec(share=0.005, us=0.5)
    assert is_negligible([StepCost(100.0, 0.001, "the step"), StepCost(0.4, 0.5, "the step")], limit)
    assert not is_negligible([StepCost(100.0, 0.001, "the step"), StepCost(100.0, 0.01, "the step")], limit)
    assert not is_negligible([StepCost(100.0, None, None)], limit)   # no share: only the floor can say
    assert not is_negligible([], limit)


@pytest.mark.parametrize("text, problem", [
    ("[min-cost]\nshare = 2\n", "share: expected a fraction of the step between 0 and 1"),
    ("[min-cost]\nKL401 = 'never'\n", 'KL401: expected a table or "none"'),
    ("[min-cost]\nKL401 = { floor = 1 }\n", "floor: not a min-cost key"),
])
def test_a_bad_min_cost_table_is_one_line_with_its_file_and_line(tmp_path, text, problem):
    config = tmp_path / "kernlint.toml"
    config.write_text(textwrap.dedent(text))
    with pytest.raises(ConfigError) as error:
        load_config(config)
    line = str(error.value)
    assert problem in line and "kernlint.toml" in line and "\n" not in line


def test_a_min_cost_key_naming_no_rule_is_an_error(tmp_path):
    config = tmp_path / "kernlint.toml"
    config.write_text("[min-cost]\nKL999 = 'none'\n")
    result = invoke("check", RESNET, "--config", config)
    assert result.exit_code == 2 and "[min-cost] KL999: no rule" in result.output
