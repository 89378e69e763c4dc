"""Warp-stall samples of one kernel launch from an Nsight Compute source export, by opcode and
over a range of SASS instructions (e.g. an unrolled epilogue).

Usage: python3 bench/ncu_stalls.py SASS.csv.xz LAUNCH [FIRST LAST]

SASS.csv.xz is `ncu -i REP --page source --csv --print-source sass | xz` (as
`bench/device-gelu.sh` PART=ncu writes it); LAUNCH indexes its kernel blocks (-1: the last);
FIRST and LAST (instruction indices within the launch) select a region to summarise.
"""
import collections
import csv
import lzma
import sys


def main():
    path, which = sys.argv[1], int(sys.argv[2])
    blocks, hdr = [], None
    for r in csv.reader(lzma.open(path, "rt")):
        if r and r[0] == "Kernel Name":
            blocks.append([])
        elif r and r[0] == "Address":
            hdr = r
        elif blocks:
            blocks[-1].append(r)
    col = {h: i for i, h in enumerate(hdr)}
    rows = blocks[which]
    stalls = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]

    def num(r, h):
        return int(r[col[h]] or 0)

    ranges = [("launch", 0, len(rows))]
    if len(sys.argv) > 4:
        ranges.append((f"instructions {sys.argv[3]}-{sys.argv[4]}", int(sys.argv[3]), int(sys.argv[4])))
    for name, lo, hi in ranges:
        c, ins = collections.Counter(), 0
        for r in rows[lo:hi]:
            ins += num(r, "Instructions Executed")
            for h in stalls:
                c[h] += num(r, h)
        top = ", ".join(f"{k[6:]} {v}" for k, v in c.most_common(8))
        print(f"{name}: {ins} warp instructions, {sum(c.values())} samples: {top}")
    by_op, ins_op = collections.Counter(), collections.Counter()
    for r in rows:
        words = [w for w in r[1].split() if not w.startswith("@")]
        op = words[0].split(".")[0] if words else ""
        by_op[op] += num(r, "Warp Stall Sampling (All Samples)")
        ins_op[op] += num(r, "Instructions Executed")
    print("top opcodes by samples: " + ", ".join(f"{op} {n} ({ins_op[op]} executed)" for op, n in by_op.most_common(10)))


if __name__ == "__main__":
    main()
