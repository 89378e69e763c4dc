#!/usr/bin/env python3
"""torch.distributed's NCCL all-reduce, the peer of `cargo xtask bench --ops multi-gpu`.

One process per GPU (mp.spawn, like torchrun), f32 tensors of each size, Sum. Each size is
checked once (every element must equal 1 + 2 + ... + world), then timed like ours: warm-up,
then three rounds of `iters` back-to-back all-reduces between two synchronizes; the median
round's time per call is written as {"rows": [{"bytes", "ms", "busbw"}]}. NCCL_NVLS_ENABLE=0
(NVLink multicast off) is set before NCCL starts.
"""
import argparse
import json
import os
import socket
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(rank, world, port, args):
    import torch
    import torch.distributed as dist

    os.environ["NCCL_NVLS_ENABLE"] = "0"
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            device_id=torch.device("cuda", rank))
    rows = []
    want = world * (world + 1) / 2
    for nbytes in args.sizes:
        n = max(nbytes // 4, 1)
        x = torch.full((n,), float(rank + 1), device="cuda", dtype=torch.float32)
        dist.all_reduce(x)
        torch.cuda.synchronize()
        if not bool((x == want).all()):
            raise SystemExit(f"rank {rank}: all-reduce of {nbytes} bytes is wrong")
        for _ in range(args.warmup):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        iters = min(args.iters, 10) if nbytes >= (256 << 20) else args.iters
        times = []
        for _ in range(3):
            dist.barrier()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(iters):
                dist.all_reduce(x)
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t0) * 1e3 / iters)
        ms = sorted(times)[1]
        busbw = nbytes / (ms * 1e-3) / 1e9 * 2 * (world - 1) / world
        rows.append({"bytes": nbytes, "ms": ms, "busbw": busbw})
        if rank == 0:
            print(f"torch all-reduce {nbytes:>12} B: {ms:.4f} ms, busbw {busbw:.2f} GB/s", flush=True)
        del x
    if rank == 0:
        import torch as t
        doc = {"rows": rows, "torch": t.__version__, "nccl": ".".join(map(str, t.cuda.nccl.version())),
               "world": world, "device": t.cuda.get_device_name(0)}
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default=",".join(str(1024 << (2 * i)) for i in range(11)))
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--gpus", type=int, default=0)
    p.add_argument("--json", required=True)
    args = p.parse_args()
    args.sizes = [int(s) for s in args.sizes.split(",")]
    os.environ["NCCL_NVLS_ENABLE"] = "0"
    import torch
    import torch.multiprocessing as mp

    world = args.gpus or torch.cuda.device_count()
    if world < 2:
        raise SystemExit(f"skipped: needs 2 CUDA devices, found {world}")
    mp.spawn(worker, args=(world, free_port(), args), nprocs=world, join=True)


if __name__ == "__main__":
    main()
