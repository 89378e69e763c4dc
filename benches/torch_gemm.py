"""Torch peers of the GEMM bench, measured on the same GPU in the same device call.

The problem is ours: D (M x N) = A (M x K, row-major) times B stored as W (N x K, row-major),
i.e. `x @ w.T`, the layout `bench --ops gemm` calls `rc`. For every shape and dtype this times
what a torch user would pick, checks each one on sampled rows against a float64 reference
before timing it, and keeps the best as the row's peer:

- `matmul`: eager `x @ w.T` (cuBLAS / cuBLASLt, chosen by torch);
- `matmul_graph`: the same call captured once in a CUDA graph and replayed (no launch cost);
- `linear_bias_gelu` rows (with `--gelu`): `torch._addmm_activation(bias, x, w.T, use_gelu=True)`
  (cuBLASLt's GELU_BIAS epilogue) and `torch.compile`d `gelu(linear(x, w, bias))`.

Inputs are random (never zeros). With `--rotate` (use it when our side rotates too, so both
sides are timed alike), a shape whose operands are smaller than twice the L2 is timed rotating
through enough copies that each call reads its operands from DRAM; without it every call reuses
one set, as `bench --ops gemm` does. Timing: CUDA
events around each call (or replay), warm-up first, the median of `--iters`.

Writes JSON {device, driver, torch, date, rows: [{case, dtype, m, n, k, batch, impl, median_ms,
tflops, correct, rel_err}], best: [{dtype, m, n, k, batch, case, impl, median_ms, tflops}]}.
"""
import argparse
import datetime
import json
import statistics
import subprocess

import torch
import torch.nn.functional as F

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "tf32": torch.float32, "f32": torch.float32}
# Relative error bound of a sampled row against float64 (inputs are exact in the input dtype).
TOL = {"bf16": 2e-2, "f16": 5e-3, "tf32": 5e-3, "f32": 1e-4}


def parse_shape(s):
    parts = [int(p) for p in s.lower().split("x")]
    if len(parts) == 3:
        parts.append(1)
    if len(parts) != 4 or min(parts) < 1:
        raise SystemExit(f"bad shape {s!r}: want MxNxK or MxNxKxBATCH, every part >= 1")
    return parts


def timed(fns, warmup, iters):
    """Median ms of one call, cycling through `fns` (one per operand copy)."""
    for i in range(warmup):
        fns[i % len(fns)]()
    torch.cuda.synchronize()
    times = []
    for i in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fns[i % len(fns)]()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def check(out, x, w, bias, gelu, dtype_name):
    """Relative error of sampled output rows against a float64 reference."""
    m = out.shape[-2]
    rows = sorted(set([0, m - 1, m // 2, m // 3]))
    xs = x[..., rows, :].double()
    ref = xs @ w.double().transpose(-1, -2)
    if bias is not None:
        ref = ref + bias.double()
    if gelu:
        ref = F.gelu(ref, approximate="tanh")
    got = out[..., rows, :].double()
    if not torch.isfinite(got).all():
        return False, float("inf")
    err = ((got - ref).norm() / ref.norm().clamp_min(1e-30)).item()
    return err <= TOL[dtype_name] * (4 if gelu else 1), err


def copies_for(bytes_one, l2):
    return max(1, min(64, -(-4 * l2 // max(bytes_one, 1)) if bytes_one < 2 * l2 else 1))


def graph_of(fn):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g


def bench_shape(dtype_name, shape, args, l2, gelu):
    m, n, k, batch = shape
    dt = DTYPES[dtype_name]
    torch.backends.cuda.matmul.allow_tf32 = dtype_name == "tf32"
    torch.backends.cudnn.allow_tf32 = dtype_name == "tf32"
    lead = (batch,) if batch > 1 else ()
    es = torch.tensor([], dtype=dt).element_size()
    one = (m * k + n * k + m * n) * batch * es
    r = copies_for(one, l2) if args.rotate else 1
    gen = torch.Generator(device="cuda").manual_seed(m * 1000003 + n * 1009 + k)
    sets = []
    for _ in range(r):
        x = torch.randn(*lead, m, k, device="cuda", dtype=dt, generator=gen)
        w = torch.randn(*lead, n, k, device="cuda", dtype=dt, generator=gen) / (k ** 0.5)
        bias = torch.randn(n, device="cuda", dtype=dt, generator=gen) if gelu else None
        out = torch.empty(*lead, m, n, device="cuda", dtype=dt)
        sets.append((x, w, bias, out))
    flops = 2.0 * m * n * k * batch
    rows = []
    case = "linear_bias_gelu" if gelu else "gemm"

    def add(impl, fns, result_of):
        ok, err = check(result_of(), sets[0][0], sets[0][1], sets[0][2], gelu, dtype_name)
        ms = timed(fns, args.warmup, args.iters) if ok else None
        rows.append({"case": case, "dtype": dtype_name, "m": m, "n": n, "k": k, "batch": batch, "impl": impl,
                     "median_ms": ms, "tflops": flops / (ms * 1e-3) / 1e12 if ms else None,
                     "correct": ok, "rel_err": err, "copies": r})

    if not gelu:
        mm = [lambda x=x, w=w, o=o: torch.matmul(x, w.transpose(-1, -2), out=o) for x, w, _, o in sets]
        mm[0]()
        add("matmul", mm, lambda: sets[0][3])
        graphs = [graph_of(f) for f in mm]
        graphs[0].replay()
        add("matmul_graph", [g.replay for g in graphs], lambda: sets[0][3])
    else:
        res = {}

        def lt_call(x, w, b):
            res["lt"] = torch._addmm_activation(b, x, w.t(), use_gelu=True)

        lt = [lambda x=x, w=w, b=b: lt_call(x, w, b) for x, w, b, _ in sets]
        lt[0]()
        add("addmm_gelu_cublaslt", lt, lambda: res["lt"])
        f = torch.compile(lambda x, w, b: F.gelu(F.linear(x, w, b), approximate="tanh"))
        comp = [lambda x=x, w=w, b=b: res.__setitem__("c", f(x, w, b)) for x, w, b, _ in sets]
        comp[0]()
        add("compiled_linear_gelu", comp, lambda: res["c"])
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", required=True, help="comma list of MxNxK or MxNxKxBATCH")
    ap.add_argument("--dtypes", default="bf16,f16,tf32")
    ap.add_argument("--gelu", default="", help="shapes for the linear_bias_gelu peers (bf16)")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--rotate", action="store_true", help="rotate operand copies past the L2 (see above)")
    ap.add_argument("--json", required=True)
    args = ap.parse_args()
    shapes = [parse_shape(s) for s in args.shapes.split(",") if s]
    dtypes = [d for d in args.dtypes.split(",") if d]
    for d in dtypes:
        if d not in DTYPES:
            raise SystemExit(f"bad dtype {d!r}: want one of {', '.join(DTYPES)}")
    props = torch.cuda.get_device_properties(0)
    l2 = getattr(props, "L2_cache_size", 50 << 20)
    rows = []
    for d in dtypes:
        for sh in shapes:
            rows += bench_shape(d, sh, args, l2, gelu=False)
            print(f"{d:5} {'x'.join(map(str, sh)):>22} " + "  ".join(
                f"{r['impl']} {r['tflops']:.1f}" if r["tflops"] else f"{r['impl']} FAILED"
                for r in rows[-2:]), flush=True)
    for sh in [parse_shape(s) for s in args.gelu.split(",") if s]:
        rows += bench_shape("bf16", sh, args, l2, gelu=True)
        print(f"gelu  {'x'.join(map(str, sh)):>22} " + "  ".join(
            f"{r['impl']} {r['median_ms']:.4f} ms" if r["median_ms"] else f"{r['impl']} FAILED"
            for r in rows[-2:]), flush=True)
    best = {}
    for r in rows:
        if r["median_ms"] is None:
            continue
        key = (r["case"], r["dtype"], r["m"], r["n"], r["k"], r["batch"])
        if key not in best or r["median_ms"] < best[key]["median_ms"]:
            best[key] = r
    try:
        driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                capture_output=True, text=True).stdout.strip().splitlines()[0]
    except (OSError, IndexError):
        driver = "unknown"
    doc = {"schema": "ferrotune-torch-gemm/1", "device": props.name, "driver": driver,
           "torch": torch.__version__, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
           "rows": rows, "best": list(best.values())}
    with open(args.json, "w") as fh:
        json.dump(doc, fh, indent=1)


if __name__ == "__main__":
    main()
