"""Torch peers of the elementwise bench, measured on the same GPU in the same device call.

Same ops, dtypes and sizes as `cargo xtask bench` (256 MiB per tensor, random inputs, bias of
4096 columns), timed with CUDA events: warm-up, then the median of many runs. Eager torch for
every op; torch.compile as well for the fused chain, where fusion is what is being compared.
Writes JSON rows {op, dtype, impl, median_ms, gbps, ratio_to_copy}.
"""
import argparse
import json
import statistics

import torch
import torch.nn.functional as F

MIB = 1 << 20
COLS = 4096


def timed(fn, warmup=5, iters=50):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", required=True)
    ap.add_argument("--size-mib", type=int, default=256)
    args = ap.parse_args()
    dev = torch.device("cuda")
    rows = []
    acts = {"add_mul": lambda v: v, "add_mul_relu": torch.relu,
            "add_mul_gelu_erf": lambda v: F.gelu(v), "add_mul_gelu_tanh": lambda v: F.gelu(v, approximate="tanh")}
    n32 = args.size_mib * MIB // 4
    x = torch.empty(n32, device=dev).uniform_(-1, 1)
    y = torch.empty_like(x)
    copy_ms = timed(lambda: y.copy_(x))
    copy_gbps = 2 * n32 * 4 / (copy_ms * 1e-3) / 1e9
    print(f"copy probe (torch f32) {copy_ms:.3f} ms {copy_gbps:.1f} GB/s")
    del x, y
    for dt_name, dt in [("f32", torch.float32), ("f16", torch.float16), ("bf16", torch.bfloat16)]:
        es = torch.tensor([], dtype=dt).element_size()
        n = (args.size_mib * MIB // es) // COLS * COLS
        a = torch.empty(n, device=dev, dtype=dt).uniform_(-4, 4)
        b = torch.empty_like(a).uniform_(-4, 4)
        c = torch.empty_like(a).uniform_(-4, 4)
        out = torch.empty_like(a)
        bias = torch.empty(COLS, device=dev, dtype=dt).uniform_(-2, 2)
        a2 = a.view(-1, COLS)
        # op -> (work, tensors moved: inputs read + output written)
        cases = {
            "copy": (lambda: out.copy_(a), 2),
            "scale": (lambda: torch.mul(a, 0.5, out=out), 2),
            "relu": (lambda: torch.clamp_min(a, 0, out=out), 2),
            # Eager gelu allocates its output; this times the op itself.
            "gelu_erf": (lambda: F.gelu(a), 2),
            "gelu_tanh": (lambda: F.gelu(a, approximate="tanh"), 2),
            "add": (lambda: torch.add(a, b, out=out), 3),
            "axpy": (lambda: out.add_(a, alpha=0.5), 3),
            "bias_add": (lambda: a2.add_(bias), 2),
        }
        for op, (fn, k) in cases.items():
            ms = timed(fn)
            gbps = k * n * es / (ms * 1e-3) / 1e9
            rows.append({"op": op, "dtype": dt_name, "impl": "eager", "median_ms": ms, "gbps": gbps,
                         "ratio_to_copy": gbps / copy_gbps})
            print(f"{op:<18} {dt_name:<5} eager    {ms:8.3f} ms {gbps:8.1f} GB/s {gbps / copy_gbps:6.3f}x")
        for op, act in acts.items():
            def chain(a=a, b=b, c=c, act=act):
                return act((a + b) * c)
            torch._dynamo.reset()  # each (op, dtype) compiles afresh; no recompile limit hit
            for impl, fn in [("eager", chain), ("compile", torch.compile(chain))]:
                ms = timed(fn)
                gbps = 4 * n * es / (ms * 1e-3) / 1e9
                rows.append({"op": op, "dtype": dt_name, "impl": impl, "median_ms": ms, "gbps": gbps,
                             "ratio_to_copy": gbps / copy_gbps})
                print(f"{op:<18} {dt_name:<5} {impl:<8} {ms:8.3f} ms {gbps:8.1f} GB/s {gbps / copy_gbps:6.3f}x")
        del a, b, c, out, a2
        torch.cuda.empty_cache()
    meta = {"schema": "ferrotune-torch-elementwise/1", "device": torch.cuda.get_device_name(),
            "torch": torch.__version__, "size_mib": args.size_mib, "copy_gbps": copy_gbps, "rows": rows}
    with open(args.json, "w") as f:
        json.dump(meta, f, indent=1)


if __name__ == "__main__":
    main()
