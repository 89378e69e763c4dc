#!/usr/bin/env python3
"""Summarises a Clifford sweep (`xtask bench --ops clifford --clifford-rows fwd_sweep,fwdbwd_sweep
--json S.json`) beside the heuristic's rows of the same run or another (`--heuristic H.json`):
per (dim, op, B, N) the fastest correct config, its ms and share of copy bandwidth, the
heuristic's ms and config, and the five fastest configs. This is what the heuristic is refit
from. Usage: clifford_sweep_summary.py SWEEP.json [--heuristic BENCH.json] [--out OUT.md]"""
import json, sys

args = sys.argv[1:]
out, heur = None, None
for flag in ("--out", "--heuristic"):
    if flag in args:
        i = args.index(flag)
        v = args[i + 1]
        del args[i:i + 2]
        if flag == "--out":
            out = v
        else:
            heur = v
sweep = json.load(open(args[0]))
plain = {}
if heur:
    for r in json.load(open(heur))["rows"]:
        plain[(r["dim"], r["op"], r["B"], r["N"])] = r
lines = [f"Sweep: {sweep.get('device', '?')}, commit {sweep.get('commit', '?')}, {sweep.get('date', '')}.", "",
         "| dim | op | B | N | best ms | best x copy | best config | heuristic ms | heuristic config | top 5 (ms) |",
         "|---|---|---|---|---|---|---|---|---|---|"]
for r in sweep["rows"]:
    if not r["op"].endswith("_sweep"):
        continue
    op = r["op"][:-len("_sweep")]
    pts = sorted((p for p in r.get("sweep", []) if p["correct"]), key=lambda p: p["ms"])
    h = plain.get((r["dim"], op, r["B"], r["N"]))
    top = "; ".join(f"{p['config']} {p['ms']:.4f}" for p in pts[:5])
    lines.append(f"| {r['dim']}D | {op} | {r['B']} | {r['N']} | {r['ms']:.4f} | {r['ratio_to_copy']:.2f} | {r['config']} | "
                 f"{h['ms']:.4f} | {h['config']} | {top} |" if h else
                 f"| {r['dim']}D | {op} | {r['B']} | {r['N']} | {r['ms']:.4f} | {r['ratio_to_copy']:.2f} | {r['config']} | - | - | {top} |")
text = "\n".join(lines) + "\n"
print(text)
if out:
    open(out, "w").write(text)
