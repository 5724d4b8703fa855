#!/usr/bin/env python3
"""Decode-step traces of a small Llama-like model, clean or with one injected launch-level regression, in
several recording styles: what a user's own decode loop looks like to kernlint, written independently of
the zoo workloads (other names, other code), so that rules are tried on traces they were not tuned on.

    python scripts/decode_traces.py --device cuda --out DIR                 # every variant x style
    python scripts/decode_traces.py --device cpu --out DIR --variants clean --styles plain
    python scripts/decode_traces.py --device cuda --out DIR --variants clean --styles steps \\
        --layers 32 --steps 64 --fp8                                         # a large clean trace

Variants (what one decode step does besides the model):
  clean          nothing else
  item-sync      stops on EOS with `if (tok == eos).any():` (a host read every step)
  mask-sync      counts the logits above a floor with a boolean-mask read, `logits[logits > floor].numel()`
                 (nonzero: a sync; a boolean-mask *write* of a scalar is masked_fill_ on CUDA, and no sync)
  tolist-sync    reads the sampled tokens back with `.tolist()`
  forced-sync    calls torch.cuda.synchronize() between the model and the sampler
  pageable-upload  uploads positions from a Python list, `torch.tensor(list, device=...)`
  host-tensor-upload  uploads positions built on the host, `pos_cpu.to(device)` (pageable memory)
  round-trip     casts the residual stream to float32 (float64 on the CPU) and straight back in each layer
Styles (how it was recorded):
  steps          torch.profiler with prof.step(): ProfilerStep#N ranges, shapes, memory
  range          record_function("decode_step") around each step, shapes, memory, stacks
  modules        no ranges, with_modules and with_stack (nn.Module and forward frames)
  plain          no ranges, no stacks, no modules: only ops and kernels
"""
from __future__ import annotations

import argparse
import gzip
import shutil
import sys
import tempfile
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

VARIANTS = ("clean", "item-sync", "mask-sync", "tolist-sync", "forced-sync", "pageable-upload",
            "host-tensor-upload", "round-trip")
STYLES = ("steps", "range", "modules", "plain")
# Recorded on request only (bench/trace_speed/generate.py): not one of the rule library's fixtures.
EXTRA_STYLES = ("cut-stacks",)
# What a rule family should say of each variant: the regressions each is meant to show.
EXPECTED = {"clean": set(), "item-sync": {"family-R4"}, "mask-sync": {"family-R4"}, "tolist-sync": {"family-R4"},
            "forced-sync": {"family-R4"}, "pageable-upload": {"family-R5"}, "host-tensor-upload": {"family-R5"},
            "round-trip": {"family-R3"}}


class RMSNorm(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return F.rms_norm(x, (x.shape[-1],), self.weight, 1e-6)


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int, max_len: int, batch: int):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.out = nn.Linear(dim, dim, bias=False)
        shape = (batch, heads, max_len, self.head_dim)
        self.register_buffer("k_cache", torch.zeros(shape), persistent=False)
        self.register_buffer("v_cache", torch.zeros(shape), persistent=False)

    def forward(self, x, pos, length: int):
        b = x.shape[0]
        q, k, v = self.qkv(x).view(b, 3, self.heads, 1, self.head_dim).unbind(1)
        self.k_cache.index_copy_(2, pos, k)
        self.v_cache.index_copy_(2, pos, v)
        keys, values = self.k_cache[:, :, :length], self.v_cache[:, :, :length]
        return self.out(F.scaled_dot_product_attention(q, keys, values).reshape(b, -1))


class MLP(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.gate_up = nn.Linear(dim, 2 * hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        return self.down(F.silu(gate) * up)


class Block(nn.Module):
    def __init__(self, dim, heads, hidden, max_len, batch, round_trip: bool):
        super().__init__()
        self.norm1, self.norm2 = RMSNorm(dim), RMSNorm(dim)
        self.attn = Attention(dim, heads, max_len, batch)
        self.mlp = MLP(dim, hidden)
        self.round_trip = round_trip

    def forward(self, x, pos, length: int):
        x = x + self.attn(self.norm1(x), pos, length)
        if self.round_trip:
            wide = torch.float64 if x.dtype == torch.float32 else torch.float32
            x = x.to(wide).to(x.dtype)   # the regression: a cast whose copy is cast straight back
        return x + self.mlp(self.norm2(x))


class DecodeModel(nn.Module):
    def __init__(self, vocab=32000, dim=512, heads=8, hidden=1536, layers=4, max_len=256, batch=8,
                 round_trip=False):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(Block(dim, heads, hidden, max_len, batch, round_trip)
                                    for _ in range(layers))
        self.norm = RMSNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens, pos, length: int):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, pos, length)
        return self.lm_head(self.norm(x))


def build(variant: str, device: str, *, layers: int = 4, batch: int = 8, fp8: bool = False, vocab: int = 32000):
    """One decode step (a closure over the model and its state) with the variant's regression in it. `vocab`:
    the embedding's and the head's size (a test's smaller one initializes in a fraction of the time)."""
    torch.manual_seed(0)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    model = DecodeModel(vocab=vocab, layers=layers, batch=batch, round_trip=variant == "round-trip")
    model = model.to(device=device, dtype=dtype).eval()
    if fp8:   # the first MLP's gate_up becomes kernlint's FP8 block-scaled linear (after .to: it keeps FP8)
        from kernlint.reference.linear import Fp8BlockLinear
        mlp = model.blocks[0].mlp
        mlp.gate_up = Fp8BlockLinear.from_float(mlp.gate_up.weight.detach())
    eos, floor = 2, -30.0
    state = {"tokens": torch.randint(3, vocab, (batch,), device=device), "n": 16}
    positions = torch.full((batch,), 16, dtype=torch.long, device=device)

    @torch.inference_mode()
    def step():
        n = state["n"]
        if variant == "pageable-upload":
            pos = torch.tensor([n] * batch, device=device)
        elif variant == "host-tensor-upload":
            pos = torch.full((batch,), n, dtype=torch.long).to(device)
        else:
            pos = positions
        logits = model(state["tokens"], pos[:1], min(n + 1, 256))
        if variant == "forced-sync" and device == "cuda":
            torch.cuda.synchronize()
        if variant == "mask-sync":
            state["kept"] = logits[logits > floor].numel()
        tokens = torch.argmax(logits, dim=-1)
        if variant == "item-sync" and (tokens == eos).any():
            tokens = tokens.clone()
        if variant == "tolist-sync":
            state["emitted"] = tokens.tolist()
        positions.add_(1)
        state["tokens"] = tokens
        state["n"] = n + 1
        return tokens

    return step


def record(variant: str, style: str, device: str, out: Path, *, layers: int = 4, steps: int = 3,
           batch: int = 8, fp8: bool = False, vocab: int = 32000) -> Path:
    """Records `steps` decode steps (after two warm-up steps) in `style` to `out` (.json.gz)."""
    from torch.profiler import ProfilerActivity, profile, record_function

    step = build(variant, device, layers=layers, batch=batch, fp8=fp8, vocab=vocab)
    for _ in range(2):
        step()
    if device == "cuda":
        torch.cuda.synchronize()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    rich = style != "plain"
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "trace.json"
        # ProfilerStep#N ranges come with a schedule: one warm-up step, then `steps` recorded ones.
        # "cut-stacks": stacks recorded from a schedule's window, which opens inside running Python frames (as
        # a serving loop's profile does): the frames the window cuts do not nest with the ones it holds.
        windowed = style in ("steps", "cut-stacks")
        schedule = torch.profiler.schedule(wait=0, warmup=1, active=steps) if windowed else None
        with profile(activities=activities, record_shapes=rich, profile_memory=rich, schedule=schedule,
                     on_trace_ready=(lambda p: p.export_chrome_trace(str(raw))) if schedule else None,
                     with_stack=style in ("range", "modules", "cut-stacks"), with_modules=style == "modules") as prof:
            for _ in range(steps + (1 if schedule else 0)):
                if style == "range":
                    with record_function("decode_step"):
                        step()
                else:
                    step()
                if schedule:
                    prof.step()
        if not schedule:
            prof.export_chrome_trace(str(raw))
        with open(raw, "rb") as src, gzip.open(out, "wb", compresslevel=6) as dst:
            shutil.copyfileobj(src, dst)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--variants", nargs="*", default=list(VARIANTS), choices=VARIANTS)
    parser.add_argument("--styles", nargs="*", default=list(STYLES), choices=STYLES + EXTRA_STYLES)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--fp8", action="store_true", help="the first MLP's gate_up is kernlint's FP8 linear")
    args = parser.parse_args(argv)
    for variant in args.variants:
        if variant == "forced-sync" and args.device == "cpu":
            continue   # torch.cuda.synchronize has nothing to wait for on the CPU
        for style in args.styles:
            path = record(variant, style, args.device, args.out / f"decode-{variant}-{style}.pt.trace.json.gz",
                          layers=args.layers, steps=args.steps, batch=args.batch, fp8=args.fp8)
            print(f"{path} ({path.stat().st_size / 1024:.0f} KiB)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
