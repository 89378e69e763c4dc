"""Summarises an Nsight Compute source page (`ncu -i R --page source --csv --print-source sass`):
the kernel's executed instructions and warp-stall samples, and the instructions with the most
samples (with their top stall reasons).

Usage: python3 bench/ncu_sass_summary.py FILE.csv[.xz] [--top N]
"""
import argparse
import csv
import io
import lzma


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--top", type=int, default=20)
    args = ap.parse_args()
    raw = lzma.open(args.file, "rt") if args.file.endswith(".xz") else open(args.file)
    rows = list(csv.reader(io.StringIO(raw.read())))
    name, hdr, data = rows[0][1], rows[1], rows[2:]
    i_s = hdr.index("Warp Stall Sampling (All Samples)")
    i_e = hdr.index("Instructions Executed")
    stalls = [i for i, h in enumerate(hdr) if h.startswith("stall_") and "Not Issued" not in h]
    num = lambda v: int(v) if v.isdigit() else 0
    base = int(data[0][0], 16)
    samples = sum(num(r[i_s]) for r in data)
    print(f"{name}: {sum(num(r[i_e]) for r in data)} warp instructions executed, {samples} stall samples")
    for r in sorted(data, key=lambda r: -num(r[i_s]))[: args.top]:
        why = sorted(((num(r[i]), hdr[i][6:]) for i in stalls if num(r[i])), reverse=True)[:2]
        why = ", ".join(f"{k} {n}" for n, k in why)
        print(f"{100 * num(r[i_s]) / samples:5.1f}%  +{int(r[0], 16) - base:05x}  {r[1].strip()[:60]:60}  x{r[i_e]}  ({why})")


if __name__ == "__main__":
    main()
