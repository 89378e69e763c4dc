"""Static SASS of one PTX entry, without a GPU: the instructions of its longest loop.

The Clifford kernels were bound by instructions, not bytes (bench/results/clifroof-5bda29ff586e/
run 3), and the instructions a row costs can be read off the SASS: this extracts one `.entry`
(and the `.func`s it calls) from a PTX file, assembles it with ptxas, disassembles it with
nvdisasm (both from `pip install nvidia-cuda-nvcc`, as `.ci/run` installs) and prints, per
entry, its registers, its SASS length and the length and opcode mix of its longest loop (the
span from a label to the last branch back to it).

    python3 bench/sass_count.py target/ptx/ferrotune_kernels.sm_90a.ptx \\
        ft_clifford_fwd_d2_f32_v4_p1 ft_clifford_fwd_d3_f32_v1_p2

`PTXAS_FLAGS="-maxrregcount=128"` passes extra flags to ptxas (what a register cap would cost
before it goes into the launch bounds).

Static counts: a loop taken once a row shows what one row costs a thread; branches inside it are
counted once whether taken or not.
"""
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile


def tool(name):
    """ptxas / nvdisasm from PATH, else from the nvidia-cuda-nvcc wheel."""
    found = shutil.which(name)
    if found:
        return found
    try:
        import nvidia.cu13 as cu

        cand = os.path.join(list(cu.__path__)[0], "bin", name)
    except ImportError:
        cand = ""
    if os.path.exists(cand):
        return cand
    sys.exit(f"{name} not found: pip install nvidia-cuda-nvcc")


def block(src, start):
    """The text from `start` to the brace closing the first one after it."""
    depth, k = 0, src.index("{", start)
    while True:
        c = src[k]
        depth += c == "{"
        depth -= c == "}"
        if c == "}" and depth == 0:
            return src[start : k + 1]
        k += 1


def extract(src, name):
    """A PTX module holding only `name` and the functions it calls (callees first)."""
    head = src[: re.search(r"^(\.visible |\.weak |\.extern |\.func|\.entry|\.global|\.shared)", src, re.M).start()]
    funcs = {m.group(1): m.start() for m in re.finditer(r"^(?:\.visible |\.weak )?\.func\s+(?:\([^)]*\)\s*)?(\S+?)\(", src, re.M)}
    m = re.search(r"\.visible \.entry " + re.escape(name) + r"\(", src)
    if not m:
        sys.exit(f"no entry {name}")
    body = block(src, m.start())
    need, seen, todo = [], set(), [body]
    while todo:
        for f in re.findall(r"call(?:\.uni)?\s*(?:\([^)]*\),\s*)?(\w+)", todo.pop()):
            if f in funcs and f not in seen:
                seen.add(f)
                need.append(block(src, funcs[f]))
                todo.append(need[-1])
    globs = "".join(l + "\n" for l in src.splitlines() if l.startswith((".global", ".extern .shared", ".shared")))
    return head + globs + "\n".join(reversed(need)) + "\n" + body + "\n"


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    ptx = sys.argv[1]
    arch = re.search(r"sm_\d+a?", os.path.basename(ptx))
    arch = arch.group(0) if arch else "sm_90a"
    src = open(ptx).read()
    with tempfile.TemporaryDirectory() as d:
        for name in sys.argv[2:]:
            p, cub = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
            open(p, "w").write(extract(src, name))
            r = subprocess.run([tool("ptxas"), f"-arch={arch}", "-v", *os.environ.get("PTXAS_FLAGS", "").split(), p, "-o", cub], capture_output=True, text=True)
            if r.returncode:
                sys.exit(r.stderr)
            regs, cur = None, None
            for line in r.stderr.splitlines():
                m = re.search(r"Compiling entry function '(\w+)'", line)
                cur = m.group(1) if m else cur
                m = re.search(r"Used (\d+) registers", line)
                if m and cur == name:
                    regs, cur = int(m.group(1)), None
            sass = subprocess.run([tool("nvdisasm"), "-c", cub], capture_output=True, text=True).stdout
            ins, labels = [], {}
            for line in sass.splitlines():
                m = re.match(r"^(\.L_x_\d+):", line)
                if m:
                    labels[m.group(1)] = len(ins)
                elif re.match(r"\s+/\*[0-9a-f]{4,}\*/", line):
                    ins.append(line.split("*/", 1)[1].strip().rstrip(" ;"))
            loops = []
            for j, t in enumerate(ins):
                m = re.search(r"BRA `\((\.L_x_\d+)\)", t)
                if m and labels.get(m.group(1), j + 1) <= j:
                    loops.append((j - labels[m.group(1)] + 1, labels[m.group(1)], j))
            print(f"{name} ({arch}): {regs} registers, {len(ins)} SASS instructions")
            if loops:
                n, a, b = max(loops)
                ops = collections.Counter()
                for t in ins[a : b + 1]:
                    w = t.split()
                    ops[(w[1] if w[0].startswith("@") else w[0]).split(".")[0]] += 1
                print(f"  longest loop: {n} instructions: " + ", ".join(f"{o} {c}" for o, c in ops.most_common(12)))


if __name__ == "__main__":
    main()
