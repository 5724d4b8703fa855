"""The five matchers on traces the test records itself on the CPU torch."""
from __future__ import annotations

import textwrap

import torch
from torch.profiler import record_function

from kernlint.rules.engine import check_trace, exit_status
from kernlint.rules.loader import parse_rule_file
from kernlint.trace.load import load_trace

DOCS = """
[docs]
what-it-does = "a"
why-is-this-bad = "b"
example = "c"
use-instead = "d"
"""


def rule(tmp_path, body: str, rid: str = "KL901"):
    text = f'id = "{rid}"\nname = "test-rule"\nseverity = "error"\nsummary = "s"\n' + textwrap.dedent(body) + DOCS
    path = tmp_path / f"{rid}.toml"
    path.write_text(text)
    return parse_rule_file(path)


def outcome(trace, r):
    return check_trace(load_trace(trace), [r]).outcomes[0]


def _decode_step():
    x = torch.randn(32, 32)

    def step():
        for _ in range(3):
            with record_function("decode_step_body"):
                y = x @ x
                if bool((y > 0).any()):  # a host sync on a GPU: aten::is_nonzero / item
                    y = y + 1

    return step


def test_forbid_in_scope_flags_each_matching_op(tmp_path, record):
    r = rule(tmp_path, """
        [scope]
        annotations = ["^decode_step_body$"]
        [check]
        type = "forbid-in-scope"
        op-categories = ["sync_op"]
        """)
    o = outcome(record(_decode_step()), r)
    assert o.status == "failed" and o.instances == 3
    assert len(o.findings) == 3
    assert all(f.event in ("aten::is_nonzero", "aten::item") for f in o.findings)
    assert all(f.scope == "annotation decode_step_body" for f in o.findings)


def test_max_count_per_scope_instance(tmp_path, record):
    trace = record(_decode_step())
    few = rule(tmp_path, """
        [scope]
        annotations = ["^decode_step_body$"]
        [check]
        type = "max-count"
        op-categories = ["gemm"]
        max = 0
        """)
    o = outcome(trace, few)
    assert o.status == "failed" and len(o.findings) == 3
    assert "1 matching events" in o.findings[0].message
    enough = rule(tmp_path, few_body := """
        [scope]
        annotations = ["^decode_step_body$"]
        [check]
        type = "max-count"
        op-categories = ["gemm"]
        max = 1
        """, rid="KL902")
    assert few_body and outcome(trace, enough).status == "passed"


def test_require_anchor(tmp_path, record):
    x = torch.randn(8, 8)

    def step():
        with record_function("layer_a"):
            with record_function("quantize"):
                x.abs()
        with record_function("layer_b"):
            x.abs()

    r = rule(tmp_path, """
        [anchor]
        op = "^quantize$"
        [scope]
        annotations = ["^layer_"]
        [check]
        type = "require-anchor"
        """)
    o = outcome(record(step), r)
    assert o.status == "failed" and o.instances == 2
    assert [f.scope for f in o.findings] == ["annotation layer_b"]


def test_forbid_temporary_alloc_ignores_buffers_that_outlive_the_scope(tmp_path, record):
    keep = []

    def step():
        with record_function("init_weights"):
            keep.append(torch.empty(128, dtype=torch.float8_e4m3fn))      # outlives the scope: fine
            tmp = torch.zeros(256, dtype=torch.float16).to(torch.float8_e5m2)  # temporary
            del tmp

    r = rule(tmp_path, """
        [scope]
        annotations = ["^init_weights$"]
        [check]
        type = "forbid-temporary-alloc"
        dtypes = ["float8_e4m3fn", "float8_e5m2"]
        """)
    o = outcome(record(step), r)
    assert o.status == "failed"
    assert [f.event for f in o.findings] == ["float8_e5m2 temporary (256 B)"]


def test_forbid_before_anchor_op_level_reports_the_outermost_op(tmp_path, record):
    x = torch.randn(4, 256, dtype=torch.bfloat16)

    def step():
        with record_function("my_linear"):
            x.new_empty(1)                 # allocation only: fine
            x.view(-1, 128)                # view: fine
            x.to(torch.bfloat16)           # same dtype: a no-op, fine
            x.float()                      # a cast: flagged once, as aten::to
            with record_function("scale_1x128"):
                x.abs().amax()
            x @ x.t()

    r = rule(tmp_path, """
        [anchor]
        op = "^scale_1x128$"
        [check]
        type = "forbid-before-anchor"
        op-categories = ["*"]
        """)
    o = outcome(record(step), r)
    assert o.level == "op" and o.status == "failed"
    assert [f.event for f in o.findings] == ["aten::to"]
    assert o.findings[0].scope == "annotation my_linear"


def test_device_only_rule_is_not_applicable_on_cpu_traces(tmp_path, record):
    r = rule(tmp_path, """
        requires-device = true
        [scope]
        annotations = [".*"]
        [check]
        type = "forbid-in-scope"
        device-categories = ["fill"]
        """)
    o = outcome(record(lambda: torch.ones(3)), r)
    assert o.status == "not-applicable" and "no GPU events" in o.reason


def test_rule_without_anchor_match_is_not_applicable_never_passed(tmp_path, record):
    r = rule(tmp_path, """
        [anchor]
        kernel = "scale_1x128"
        op = "^scale_1x128$"
        [check]
        type = "forbid-before-anchor"
        device-categories = ["*"]
        op-categories = ["*"]
        """)
    o = outcome(record(lambda: torch.ones(3) + 1), r)
    assert o.status == "not-applicable" and o.findings == []
    assert exit_status([check_trace(load_trace(record(lambda: torch.ones(3))), [r])]) == 0
