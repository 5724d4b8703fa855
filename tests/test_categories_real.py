"""Categories on traces that other projects recorded (fixtures/external, see its README): fbgemm's embedding
kernels, a ROCm MI250 trace, host syncs of a two-rank recommender run; and the c10 DeviceType table."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import FIXTURES
from kernlint.trace.dtypes import DEVICE_TYPE_CODES, HOST_DEVICE_TYPE_CODES
from kernlint.trace.load import load_trace

EXTERNAL = FIXTURES / "external"
HTA_PAIR = [EXTERNAL / "hta__trace_filter_2rank" / f"trace_filter__sampled_rank-{r}.json.gz" for r in (0, 1)]
AMD = EXTERNAL / "hta__amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz"
RESNET_2021 = EXTERNAL / "kineto__resnet50_num_workers_0__worker0.1623143089861.pt.trace.json.gz"
EXTERNAL_TRACES = sorted(EXTERNAL.rglob("*.json.gz"))
DEVICE = ["kernel", "memcpy", "memset"]


@pytest.fixture(scope="module")
def frames():
    cache: dict[Path, object] = {}

    def get(path: Path):
        if path not in cache:
            cache[path] = load_trace(path).frame
        return cache[path]

    return get


def _kernels(f):
    return f[f["kind"].astype(str).isin(DEVICE)]


# -- fbgemm / embedding ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", HTA_PAIR, ids=["rank0", "rank1"])
def test_no_fbgemm_or_embedding_kernel_is_a_gemm(frames, path):
    k = _kernels(frames(path))
    fb = k[k["name"].str.contains("fbgemm|embedding|embs", case=False)]
    assert len(fb) > 0
    assert not (fb["category"] == "gemm").any(), sorted(set(fb.loc[fb["category"] == "gemm", "name"]))
    embedding = k[k["name"].str.contains("split_embedding|bounds_check_indices")]
    assert len(embedding) > 0 and (embedding["category"] == "embedding").all()
    # The real GEMMs of the same run stay GEMMs: cuBLAS sgemm / gemv and CUTLASS s1688gemm.
    gemms = k[k["name"].str.contains(r"sgemm|s1688gemm|gemv", regex=True)]
    assert len(gemms) > 0 and (gemms["category"] == "gemm").all()


@pytest.mark.parametrize("path", EXTERNAL_TRACES, ids=[p.name[:40] for p in EXTERNAL_TRACES])
def test_every_kernel_in_the_external_traces_is_classified(frames, path):
    k = _kernels(frames(path))
    unknown = sorted(set(k.loc[k["category"] == "other", "name"]))
    assert not unknown, unknown


# -- ROCm / HIP -------------------------------------------------------------------------------------------------

def test_hip_runtime_calls_are_categorized_like_cuda(frames):
    f = frames(AMD)
    runtime = f[f["kind"].astype(str) == "runtime"]
    by_name = dict(zip(runtime["name"], runtime["category"]))
    assert by_name == {"hipLaunchKernel": "launch", "hipExtModuleLaunchKernel": "launch",
                       "hipMemcpyWithStream": "sync", "hipDeviceSynchronize": "sync",
                       "hipGetDevicePropertiesR0600": "runtime_other"}
    k = _kernels(f)
    tensile = k[k["name"].str.startswith("Cijk_")]
    assert len(tensile) == 2 and (tensile["category"] == "gemm").all()
    assert (k["launcher"] >= 0).all()


def _with_memory_events(path: Path, out: Path, device_type: int) -> Path:
    """The AMD trace plus an alloc/free pair inside its first aten::empty, as a ROCm build records them.

    The recorded trace was taken without profile_memory, so it has no `[memory]` events of its own."""
    data = json.loads(gzip.decompress(path.read_bytes()))
    events = data["traceEvents"]
    assert not any(e.get("name") == "[memory]" for e in events)
    empty = next(e for e in events if e.get("cat") == "cpu_op" and e.get("name") == "aten::empty")
    common = {"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": empty["pid"],
              "tid": empty["tid"]}
    for ts, nbytes in ((empty["ts"] + empty["dur"] / 2, 4096), (empty["ts"] + empty["dur"] + 50, -4096)):
        events.append({**common, "ts": ts, "args": {"Addr": 140000000, "Bytes": nbytes, "Total Allocated": 4096,
                                                    "Total Reserved": 2097152, "Device Type": device_type,
                                                    "Device Id": 0}})
    out.write_bytes(gzip.compress(json.dumps(data).encode()))
    return out


@pytest.mark.parametrize("device_type, device", [(6, 0), (1, 0), (12, 0), (0, -1)],
                         ids=["hip", "cuda", "xpu", "cpu"])
def test_memory_events_keep_their_device_on_any_accelerator(tmp_path, device_type, device):
    f = load_trace(_with_memory_events(AMD, tmp_path / "amd_mem.json.gz", device_type)).frame
    mem = f[f["kind"].astype(str).isin(["alloc", "free"])]
    assert list(mem["kind"].astype(str)) == ["alloc", "free"]
    assert list(mem["device"]) == [device, device]
    alloc, free = mem.index
    assert mem.at[alloc, "paired"] == free and mem.at[free, "paired"] == alloc


def test_the_device_type_table_matches_torch():
    torch_codes = {int(v): k.lower() for k, v in torch.autograd.DeviceType.__members__.items()}
    torch_codes = {c: ("privateuseone" if n == "privateuse1" else n) for c, n in torch_codes.items()}
    assert DEVICE_TYPE_CODES == torch_codes
    assert DEVICE_TYPE_CODES[6] == "hip" and DEVICE_TYPE_CODES[1] == "cuda" and DEVICE_TYPE_CODES[0] == "cpu"
    assert HOST_DEVICE_TYPE_CODES == {0}
    for name in ("cpu", "cuda", "hip", "xpu", "mps", "mtia", "privateuseone"):
        assert torch.device(name).type == name
    assert {DEVICE_TYPE_CODES[c] for c in (0, 1, 6, 12, 13, 19)} == {"cpu", "cuda", "hip", "xpu", "mps", "mtia"}


# -- host syncs -------------------------------------------------------------------------------------------------

def test_stream_wait_event_is_never_a_sync(frames):
    for path in EXTERNAL_TRACES:
        f = frames(path)
        waits = f[f["name"] == "cudaStreamWaitEvent"]
        assert (waits["category"] == "runtime_other").all(), path.name


def _outermost_syncs(f) -> list[int]:
    """Runtime calls of category sync not under a sync_op op, plus sync_op ops not under another."""
    kind = f["kind"].astype(str).to_numpy()
    cat = f["category"].to_numpy()
    op = f["op"].to_numpy()
    parent = f["parent_op"].to_numpy()

    def under_sync_op(row: int) -> bool:
        o = parent[row] if kind[row] == "op" else op[row]
        while o >= 0:
            if cat[o] == "sync_op":
                return True
            o = parent[o]
        return False

    rows = np.flatnonzero(((kind == "runtime") & (cat == "sync")) | ((kind == "op") & (cat == "sync_op")))
    return [int(r) for r in rows if not under_sync_op(int(r))]


@pytest.mark.parametrize("rank, items, to_cpu", [(0, 3, 5), (1, 4, 4)])
def test_pageable_device_to_host_copies_are_syncs(frames, rank, items, to_cpu):
    f = frames(HTA_PAIR[rank])
    dtoh = f[f["name"] == "Memcpy DtoH (Device -> Pageable)"]
    launchers = f.loc[dtoh["launcher"]]
    assert len(dtoh) == items + to_cpu
    assert (launchers["name"] == "cudaMemcpyAsync").all() and (launchers["category"] == "sync").all()
    # Every other cudaMemcpyAsync (host-to-device, device-to-device) stays a memcpy call.
    others = f[(f["name"] == "cudaMemcpyAsync") & ~f.index.isin(launchers.index)]
    assert len(others) > 0 and (others["category"] == "memcpy_call").all()
    # The trace has no cudaStreamSynchronize at all: before, none of these syncs showed as a runtime call.
    assert not (f["name"] == "cudaStreamSynchronize").any()

    syncs = f.loc[_outermost_syncs(f)]
    # .item(): the op is recorded; its cudaMemcpyAsync (under _local_scalar_dense) is not counted again.
    item_ops = syncs[syncs["name"] == "aten::item"]
    assert len(item_ops) == items
    # .to("cpu") of device tensors: a pageable copy under aten::copy_, a sync of its own.
    calls = syncs[syncs["kind"].astype(str) == "runtime"]
    assert len(calls) == to_cpu
    assert (f.loc[calls["op"], "name"] == "aten::copy_").all()
    assert len(syncs) == items + to_cpu


def test_syncs_without_op_records_count_from_the_memcpy_alone(frames, tmp_path):
    """With ops not recorded, each .item() shows only as its cudaMemcpyAsync: still a sync."""
    data = json.loads(gzip.decompress(HTA_PAIR[0].read_bytes()))
    data["traceEvents"] = [e for e in data["traceEvents"] if e.get("cat") != "cpu_op"]
    path = tmp_path / "no_ops.json.gz"
    path.write_bytes(gzip.compress(json.dumps(data).encode()))
    f = load_trace(path).frame
    syncs = f.loc[_outermost_syncs(f)]
    assert (syncs["name"] == "cudaMemcpyAsync").all()
    assert len(syncs) == 3 + 5


def test_pageable_host_to_device_copies_are_not_syncs_in_old_kineto_traces(frames):
    f = frames(RESNET_2021)
    htod = f[f["name"] == "Memcpy HtoD (Pageable -> Device)"]
    assert len(htod) == 12
    assert (f.loc[htod["launcher"], "category"] == "memcpy_call").all()
    assert set(f.loc[f["name"].str.contains("Synchronize"), "category"]) == {"sync"}


EDGES = FIXTURES / "traces" / "gpu-edges"


@pytest.mark.parametrize("case", ["syncs-balanced", "syncs-unbalanced"])
@pytest.mark.parametrize("rank", [0, 1])
def test_h200_syncs_count_the_same_with_and_without_ops(frames, case, rank):
    """torch 2.11 on the H200: `.cpu()` copies into pageable memory (a sync) and then synchronizes the stream;
    `.item()` and `nonzero` copy into pinned memory and synchronize. Dropping the ops keeps the count."""
    with_ops = frames(EDGES / case / f"rank{rank}.pt.trace.json.gz")
    no_ops = frames(EDGES / f"{case}-noops" / f"rank{rank}.pt.trace.json.gz")
    assert len(_outermost_syncs(with_ops)) == len(_outermost_syncs(no_ops))
    for f in (with_ops, no_ops):
        pageable = f[f["name"] == "Memcpy DtoH (Device -> Pageable)"]
        pinned = f[f["name"] == "Memcpy DtoH (Device -> Pinned)"]
        assert (f.loc[pageable["launcher"], "category"] == "sync").all()
        assert (f.loc[pinned["launcher"], "category"] == "memcpy_call").all()
        assert len(pageable) == (4 if case == "syncs-balanced" else 0)
