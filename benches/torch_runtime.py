#!/usr/bin/env python3
"""Torch's side of the runtime bench (run in the same device call as `xtask bench --ops
runtime`): pinned vs pageable copies, preallocated vs allocate-per-iteration through torch's
caching allocator, CUDA graph replay vs eager for chains of 6 and 50 small kernels. The same
workloads as benches/runtime.rs. With --ours, prints the joined table and the targets."""
import argparse, json, statistics, sys, time

import torch


def wall(fn, samples, warmup=2):
    for _ in range(warmup):
        fn()
    v = []
    for _ in range(samples):
        t = time.perf_counter()
        fn()
        v.append((time.perf_counter() - t) * 1e3)
    return statistics.median(v)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", required=True, help="torch's results (written; read with --join)")
    ap.add_argument("--ours", help="our runtime bench JSON, to print the joined table")
    ap.add_argument("--join", action="store_true", help="only print the table of --ours and --json")
    ap.add_argument("--copy-mib", type=int, default=256)
    ap.add_argument("--alloc-elems", type=int, default=1 << 18)
    ap.add_argument("--samples", type=int, default=15)
    a = ap.parse_args()
    if a.join:
        return join(a.ours, json.load(open(a.json))["rows"])
    dev = torch.device("cuda")
    rows = {}
    torch.manual_seed(0)

    # Transfers.
    n = a.copy_mib << 18
    nbytes = n * 4
    host = torch.rand(n)
    pinned = host.pin_memory()
    d = torch.empty(n, device=dev)
    sync = torch.cuda.synchronize

    def h2d_pageable():
        d.copy_(host)
        sync()

    def h2d_pinned():
        d.copy_(pinned, non_blocking=True)
        sync()

    def d2h_pageable():
        host.copy_(d)
        sync()

    def d2h_pinned():
        pinned.copy_(d, non_blocking=True)
        sync()

    for name, fn in [("H2D pageable", h2d_pageable), ("H2D pinned", h2d_pinned),
                     ("D2H pageable", d2h_pageable), ("D2H pinned", d2h_pinned)]:
        rows[name] = nbytes / (wall(fn, a.samples) * 1e-3) / 1e9
    assert torch.equal(host, pinned)
    del d

    # Allocation loop: the same step as ours (dst = 3 src through two scratch buffers).
    m = a.alloc_elems
    src = torch.rand(m, device=dev)
    dst = torch.empty(m, device=dev)
    px, py = torch.empty(m, device=dev), torch.empty(m, device=dev)
    inner = 50

    def step(x, y):
        torch.mul(src, 2.0, out=x)
        torch.add(x, src, out=y)
        dst.copy_(y)
        sync()

    def pre():
        for _ in range(inner):
            step(px, py)

    def fresh():
        for _ in range(inner):
            step(torch.empty(m, device=dev), torch.empty(m, device=dev))

    rows["preallocated"] = wall(pre, a.samples) * 1e3 / inner
    rows["alloc per iteration: torch caching allocator"] = wall(fresh, a.samples) * 1e3 / inner
    assert torch.equal(dst, src * 2.0 + src)

    # Graph replay vs eager, chains of k small kernels.
    reps = 200
    for k in (6, 50):
        s = torch.rand(1024, device=dev)
        xa, xb = torch.empty_like(s), torch.empty_like(s)

        def chain():
            xa.copy_(s)
            for i in range(1, k):
                if i % 2 == 1:
                    torch.mul(xa, 3.0, out=xb)
                else:
                    torch.mul(xb, 0.5, out=xa)

        chain()
        sync()
        want = (xa.clone(), xb.clone())
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            chain()
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            chain()
        g.replay()
        sync()
        assert torch.equal(xa, want[0]) and torch.equal(xb, want[1])

        def eager():
            for _ in range(reps):
                chain()
            sync()

        def replay():
            for _ in range(reps):
                g.replay()
            sync()

        rows[f"eager chain of {k}"] = wall(eager, a.samples) * 1e3 / (reps * k)
        rows[f"graph replay chain of {k}"] = wall(replay, a.samples) * 1e3 / (reps * k)

    out = {
        "schema": "torch-runtime-bench/1",
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "rows": rows,
    }
    with open(a.json, "w") as f:
        json.dump(out, f, indent=1)
    for k, v in rows.items():
        print(f"torch {k:<50} {v:10.3f}")

    if a.ours:
        return join(a.ours, rows)
    return 0


def join(ours_path, rows):
    """Prints ours beside torch's, with the issue's targets."""
    ours = {r["name"]: r["value"] for r in json.load(open(ours_path))["rows"]}
    print("\n=== ferrotune vs torch (same call)")
    checks = [
        ("H2D pinned", "GB/s", "ours/torch >= 0.95", lambda o, t: o / t >= 0.95),
        ("D2H pinned", "GB/s", "ours/torch", None),
        ("H2D pageable", "GB/s", "ours/torch", None),
        ("graph replay chain of 50", "us/kernel", "ours <= 1.5 and ours <= torch", lambda o, t: o <= 1.5 and o <= t),
        ("graph replay chain of 6", "us/kernel", "ours/torch", None),
        ("eager chain of 50", "us/kernel", "ours/torch", None),
        ("alloc per iteration: ferrotune pool", "us/iter", "vs torch caching allocator", None),
    ]
    for name, unit, target, ok in checks:
        tname = "alloc per iteration: torch caching allocator" if "pool" in name else name
        o, t = ours.get(name), rows.get(tname)
        if o is None or t is None:
            print(f"{name:<40} missing")
            continue
        verdict = "" if ok is None else ("MET" if ok(o, t) else "NOT MET")
        print(f"{name:<40} ours {o:9.3f} torch {t:9.3f} {unit:<9} ratio {o / t:6.3f}  {target} {verdict}")
    pre = ours.get("preallocated")
    pool = ours.get("alloc per iteration: ferrotune pool")
    if pre and pool:
        print(f"pool vs preallocated: {pool / pre:.3f}x (target <= 1.2) {'MET' if pool / pre <= 1.2 else 'NOT MET'}")
    ser = ours.get("serial H2D, compute, D2H (1 stream)")
    pip = ours.get("chunked pipeline (3 streams)")
    if ser and pip:
        print(f"overlap speedup: {ser / pip:.2f}x (target >= 1.6) {'MET' if ser / pip >= 1.6 else 'NOT MET'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
