#!/usr/bin/env python3
"""Summarise forced-config runs of the irregular suite: for each class prefix, one row per
shape, ours (best of single call, queued and CUDA graph, ms) under each run `<prefix>-<name>.json`
in DIR, and cuBLAS's best from the `auto` run. Usage: classes_table.py DIR PREFIX [PREFIX ...]"""
import glob
import json
import os
import sys


def best(r, who):
    keys = [r[who]['median_ms'], r.get(f'{who}_queued_ms'), r.get(f'{who}_graph_ms')]
    return min(x for x in keys if x)


def main():
    d = sys.argv[1]
    for cls in sys.argv[2:]:
        runs = sorted(glob.glob(f'{d}/{cls}-*.json'))
        data = {os.path.basename(p)[len(cls) + 1:-5]: json.load(open(p))['rows'] for p in runs}
        if not data:
            continue
        names = list(data)
        print(f'== {cls}: ours best-of ms per run; cuBLAS best-of ms from the auto run')
        print('shape'.ljust(18) + ''.join(n.rjust(10) for n in names) + '   cuBLAS')
        auto = {(r['m'], r['n'], r['k']): r for r in data.get('auto', [])}
        for key in [(r['m'], r['n'], r['k']) for r in data[names[0]]]:
            line = f'{key[0]}x{key[1]}x{key[2]}'.ljust(18)
            for n in names:
                r = next((r for r in data[n] if (r['m'], r['n'], r['k']) == key), None)
                line += f'{best(r, "ours"):10.4f}' if r is not None and r['correct'] else '       bad'
            line += f'  {best(auto[key], "cublas"):.4f}' if key in auto else ''
            print(line)


if __name__ == '__main__':
    main()
