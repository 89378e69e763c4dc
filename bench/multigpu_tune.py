#!/usr/bin/env python3
"""The tuning half of bench/device-multigpu.sh: watches a device-parallel tuning run's part
files (to kill it -9 mid-run), snapshots what they hold at the kill, and writes
multigpu-tune.json (1 vs 2 GPU speedup and profile equality, each GPU's timeline from the
shared queue: start-up, shapes, idle tail; kill/resume numbers).

  multigpu_tune.py watch PROFILE PID MIN_ENTRIES MIN_JOURNAL MAX_S
  multigpu_tune.py snapshot PROFILE OUT.json
  multigpu_tune.py summary TMPDIR LOGDIR OUT.json T1 T2 E1 E2 SHAPES KILLINFO.json
"""
import glob
import json
import os
import re
import sys
import time

try:
    import tomllib
except ImportError:  # python < 3.11
    tomllib = None


def load(path):
    """A profile's entries and journal records ([] when absent or unreadable)."""
    if not os.path.exists(path):
        return None
    if tomllib is None:
        text = open(path).read()
        return {"entry": [{}] * text.count("[[entry]]"), "journal": [{}] * text.count("[[journal]]")}
    with open(path, "rb") as f:
        try:
            return tomllib.load(f)
        except Exception:  # caught mid-write cannot happen (atomic rename), but be safe
            return {"entry": [], "journal": []}


def parts(profile):
    return sorted(glob.glob(glob.escape(profile) + ".dev*.part"))


def shape_key(r):
    return "%s %s %s %s" % (r.get("op"), r.get("dtype"), r.get("layout"), "x".join(map(str, r.get("measured_shape", []))))


def config_key(c):
    return json.dumps(c, sort_keys=True)


def alive(pid):
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    # A zombie (exited, not yet reaped) counts as gone.
    try:
        return open("/proc/%d/stat" % pid).read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def watch(profile, pid, min_entries, min_journal, max_s):
    """Returns once the part files hold MIN_ENTRIES finished shapes and MIN_JOURNAL journal
    records of unfinished ones while PID still runs (exit 0), or when PID ends or MAX_S
    passes (exit 1)."""
    t0 = time.time()
    seen = {"entries": 0, "journal": 0}
    while time.time() - t0 < max_s:
        if not alive(pid):
            print(json.dumps({"ready": False, "why": "the run ended first", **seen}))
            return 1
        e = j = 0
        for p in parts(profile):
            d = load(p) or {}
            e += len(d.get("entry", []))
            j += len(d.get("journal", []))
        seen = {"entries": e, "journal": j, "after_s": round(time.time() - t0, 2)}
        if e >= min_entries and j >= min_journal:
            print(json.dumps({"ready": True, **seen}))
            return 0
        time.sleep(0.1)
    print(json.dumps({"ready": False, "why": "max wait passed", **seen}))
    return 1


def snapshot(profile, out):
    """What the killed run left: finished shapes (entries) and journalled measurements."""
    entries, journal, evaluations = [], [], 0
    for p in parts(profile) + [profile]:
        d = load(p) or {}
        entries += [shape_key(e) for e in d.get("entry", [])]
        evaluations += sum(int(e.get("evaluations", 0)) for e in d.get("entry", []))
        for r in d.get("journal", []):
            j = {"shape": shape_key(r), "role": r.get("role"), "config": config_key(r.get("config"))}
            if j not in journal:  # a kill between a part's write and the profile's leaves a copy in each
                journal.append(j)
    doc = {"part_files": [os.path.basename(p) for p in parts(profile)], "finished_shapes": sorted(set(entries)),
           "evaluations_of_finished_shapes": evaluations,
           "journal": journal}
    json.dump(doc, open(out, "w"), indent=1)


def entries(path):
    """(key, config, median_ms) of a profile's entries."""
    d = load(path)
    if d is None:
        return None
    return {shape_key(e) + " " + str(e.get("device", {}).get("name")) + " " + str(e.get("build")):
            (config_key(e.get("config")), e.get("median_ms")) for e in d.get("entry", [])}


def compare(a, b):
    """Do two profiles hold the same entries and configs? Differences, with both timings."""
    if a is None or b is None:
        return {"same_keys": False, "same_configs": False, "configs_that_differ": None}
    differ = [{"shape": k, "configs": [a[k][0], b[k][0]], "median_ms": [a[k][1], b[k][1]]}
              for k in sorted(a) if k in b and a[k][0] != b[k][0]]
    return {"entries": [len(a), len(b)], "same_keys": sorted(a) == sorted(b),
            "same_configs": sorted(a) == sorted(b) and not differ, "configs_that_differ": len(differ),
            "differences": differ}


def took(log):
    """The tuner's own wall time ("device-parallel tuning took X s on N devices")."""
    m = re.search(r"tuning took ([0-9.]+) s", open(log).read()) if os.path.exists(log) else None
    return float(m.group(1)) if m else None


def timeline(log):
    """Per GPU, from the "[gpu D +T s]" lines of a device-parallel run: when its worker was
    ready (start-up), the shapes it tuned (taken from the shared queue), when it finished its
    last one and how long it then idled before the run ended."""
    if not os.path.exists(log):
        return None
    total, gpus, started, shape_s = took(log), {}, {}, {}
    for line in open(log):
        m = re.match(r"\[gpu (\d+) \+([0-9.]+)s\] (.*)", line)
        if not m:
            continue
        g = gpus.setdefault(m.group(1), {"ready_s": None, "shapes": [], "last_done_s": None})
        at, text = float(m.group(2)), m.group(3)
        label = text.split(":")[0]
        if g["ready_s"] is None and "(build " in text:
            g["ready_s"] = at
        elif " planned, " in text:
            started[label] = at
        elif " evaluations, " in text:
            g["shapes"].append(label)
            g["last_done_s"] = at
            if label in started:
                shape_s[label] = round(at - started[label], 3)
    for g in gpus.values():
        g["idle_tail_s"] = round(total - g["last_done_s"], 2) if total and g["last_done_s"] is not None else None
    return {"tuner_s": total, "gpus": gpus, "shape_s": shape_s}


def contention(one, two):
    """Each shape's time (start to done) on 2 GPUs over its time alone on 1, summed over the
    shapes both runs tuned: above 1, the GPUs' sessions slow each other (host CPU, PCIe)."""
    if not one or not two:
        return None
    common = [k for k in one["shape_s"] if k in two["shape_s"]]
    a, b = sum(one["shape_s"][k] for k in common), sum(two["shape_s"][k] for k in common)
    return round(b / a, 3) if a > 0 else None


def summary(t, r, out, t1, t2, e1, e2, shapes, killinfo):
    k1, k2 = took(f"{r}/tune-1gpu.txt"), took(f"{r}/tune-2gpu.txt")
    doc = {
        "commit": os.environ.get("FERROTUNE_COMMIT"), "shapes": shapes,
        "one_gpu_s": t1, "two_gpu_s": t2, "exit": [e1, e2],
        "tuner_s": [k1, k2], "tuner_speedup": (k1 / k2) if k1 and k2 and e1 == 0 and e2 == 0 else None,
        "one_vs_two": compare(entries(f"{t}/one.toml"), entries(f"{t}/two.toml")),
    }
    one, two = timeline(f"{r}/tune-1gpu.txt"), timeline(f"{r}/tune-2gpu.txt")
    doc["timeline"] = {"one_gpu": one, "two_gpus": two, "shape_time_2gpu_over_1gpu": contention(one, two)}
    info = None
    if os.path.exists(killinfo):
        try:
            info = json.load(open(killinfo))
        except ValueError:
            info = {"killinfo_unparsed": open(killinfo).read()}
    snap = json.load(open(f"{t}/at-kill.json")) if os.path.exists(f"{t}/at-kill.json") else None
    rep = json.load(open(f"{t}/kill.json")) if os.path.exists(f"{t}/kill.json") else None
    if info is not None:
        kill = dict(info)
        kill["uninterrupted_tuner_s"] = took(f"{r}/tune-ref.txt")
        if snap is not None:
            done = set(snap["finished_shapes"])
            per_shape = {}
            for j in snap["journal"]:
                per_shape.setdefault(j["shape"], []).append(j)
            kill["at_kill"] = {"part_files": snap["part_files"], "finished_shapes": len(done),
                               "evaluations_of_finished_shapes": snap.get("evaluations_of_finished_shapes"),
                               "journalled_candidates_of_unfinished_shapes": len(snap["journal"]),
                               "shapes_in_progress": len([s for s in per_shape if s not in done])}
        if snap is not None and rep is not None:
            shapes_rep = {shape_key({"op": s["op"], "dtype": s["dtype"], "layout": s["layout"],
                                     "measured_shape": s["shape"]}): s for s in rep["shapes"]}
            remeasured, rows = 0, []
            for key, s in sorted(shapes_rep.items()):
                journalled = len(per_shape.get(key, []))
                if key in done:
                    again = 0 if s["existing"] else s["measured"]  # a finished shape measured again
                else:
                    again = max(0, journalled - s["reused"])  # journalled candidates not reused
                remeasured += again
                if key in done or journalled:
                    rows.append({"shape": key, "finished_before_kill": key in done, "journalled": journalled,
                                 "reused": s["reused"], "measured_after_resume": s["measured"],
                                 "existing": s["existing"], "remeasured": again})
            kill["resume"] = {
                "shapes": len(shapes_rep),
                "existing_shapes": sum(1 for s in rep["shapes"] if s["existing"]),
                "reused_from_journal": sum(s["reused"] for s in rep["shapes"]),
                "measured_after_resume": sum(s["measured"] for s in rep["shapes"]),
                "finished_candidates_remeasured": remeasured,
                "shapes_touched_before_kill": rows,
            }
        kill["resumed_vs_uninterrupted"] = compare(entries(f"{t}/ref.toml"), entries(f"{t}/kill.toml"))
        doc["kill"] = kill
    json.dump(doc, open(out, "w"), indent=1)
    brief = {k: v for k, v in doc.items() if k != "kill"}
    print(json.dumps(brief, indent=1))
    if "kill" in doc:
        k = {a: b for a, b in doc["kill"].items() if a != "resume"}
        k["resume"] = {a: b for a, b in doc["kill"].get("resume", {}).items() if a != "shapes_touched_before_kill"}
        print(json.dumps(k, indent=1))


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "watch":
        sys.exit(watch(args[0], int(args[1]), int(args[2]), int(args[3]), float(args[4])))
    elif cmd == "snapshot":
        snapshot(args[0], args[1])
    elif cmd == "compare":
        # compare A.toml B.toml: the two profiles' entries and configs, as JSON on stdout.
        print(json.dumps(compare(entries(args[0]), entries(args[1])), indent=1))
    elif cmd == "summary":
        t, r, out = args[:3]
        t1, t2, e1, e2, shapes = map(int, args[3:8])
        summary(t, r, out, t1, t2, e1, e2, shapes, args[8])
    else:
        sys.exit("unknown command " + cmd)
