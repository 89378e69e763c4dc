"""Which kernels torch's `x @ w.T` runs, and for how long: torch.profiler over a few calls per
shape (random inputs, warm-up first). Prints one line per (shape, kernel) with the mean CUDA
time per call and writes JSON {device, torch, date, rows: [{dtype, m, n, k, kernel, calls,
mean_us}]} to --json. Usage: python3 bench/torch_kernels.py --shapes 3072x3072x1536,... --dtypes bf16
"""
import argparse
import datetime
import json

import torch
from torch.profiler import ProfilerActivity, profile

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", required=True)
    ap.add_argument("--dtypes", default="bf16")
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--json")
    a = ap.parse_args()
    rows = []
    for dn in a.dtypes.split(","):
        for s in a.shapes.split(","):
            m, n, k = (int(v) for v in s.split("x"))
            x = torch.randn(m, k, device="cuda", dtype=DTYPES[dn])
            w = torch.randn(n, k, device="cuda", dtype=DTYPES[dn]) / k**0.5
            for _ in range(5):
                x @ w.T
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as p:
                for _ in range(a.calls):
                    x @ w.T
                torch.cuda.synchronize()
            for e in p.key_averages():
                if e.device_type.name != "CUDA" or e.count < a.calls:
                    continue
                us = e.device_time_total / e.count
                rows.append({"dtype": dn, "m": m, "n": n, "k": k, "kernel": e.key, "calls": e.count, "mean_us": us})
                print(f"{dn} {s}: {us:8.1f} us  {e.key}")
    if a.json:
        meta = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                "date": datetime.datetime.now(datetime.timezone.utc).isoformat(), "rows": rows}
        json.dump(meta, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
