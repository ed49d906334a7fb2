#!/usr/bin/env python3
"""Warp-stall samples of one kernel's SASS, by region, from an ncu source export.

Input: the CSV that `ncu --import REPORT --page source --print-source sass --csv` prints for
one kernel profiled with `--section SourceCounters` (plain or gzipped; docs/runs/run48/call1 keeps
two). Output: per region, the stall samples, the instructions executed and the main stall
reasons; with --top N, each region's N instructions with the most samples.

Regions: the code between two grid-wide barriers of a persistent kernel (codegen/persistent.go;
each barrier's wait polls %globaltimer, so its SASS reads SR_GLOBALTIMERLO), so region k is the
k-th phase's code in the order of the kernel's phases, those that did not run included (a
barrier's own wait counts towards the region before it); a per-op kernel is one region. Every
other bounded wait polls %globaltimer too: the chained kernels' and, in the persistent bf16
forward, FC2's wait for FC1's row tiles (codegen/lower_phase_signals.go), which replaces the
barrier between FC1 and FC2: there the boundary between FC1's region and FC2's falls at that
wait, wherever ptxas places its loop, and the regions after it stay aligned with the phases only
if that loop reads the timer where the barrier did. Count a kernel's phases before reading its
regions. The
out-of-line wait loops ptxas places after the kernel's last
EXIT (`@!P BRA` to a loop that retries an mbarrier wait, then `BRA` back) count towards the
region their final branch returns to.

Usage: python3 bench/sass_stalls.py SASS.csv[.gz] [--top N]
"""
import argparse
import collections
import csv
import gzip
import re


def load(path):
    """The header and the instruction rows of an ncu SASS source export."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        rows = list(csv.reader(f))
    return rows[1], rows[2:]  # row 0 names the kernel


def regions(data):
    """Start rows of the regions: 0, then the row after each grid barrier's last
    SR_GLOBALTIMERLO read (reads within 16 rows of each other are one barrier's) and the
    synchronisation that follows it up to the next FENCE.VIEW.ASYNC.G."""
    timer = [i for i, r in enumerate(data) if "SR_GLOBALTIMERLO" in r[1]]
    starts = [0]
    i = 0
    while i < len(timer):
        j = i
        while j + 1 < len(timer) and timer[j + 1] - timer[j] <= 16:
            j += 1
        end = timer[j]
        for k in range(end, min(end + 40, len(data))):
            if "FENCE.VIEW.ASYNC.G" in data[k][1]:
                end = k
                break
        starts.append(end + 1)
        i = j + 1
    return starts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=0, help="the N instructions with the most samples per region")
    a = ap.parse_args()
    hdr, data = load(a.csv)
    col = {h: i for i, h in enumerate(hdr)}
    stalls = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]
    num = lambda r, h: int(r[col[h]] or 0)
    addr = {int(r[0], 16): i for i, r in enumerate(data)}
    last_exit = max((i for i, r in enumerate(data) if re.search(r"\bEXIT\b", r[1])), default=len(data) - 1)
    starts = regions(data[: last_exit + 1])
    region_of = lambda i: max(k for k, s in enumerate(starts) if s <= i)
    owner = list(range(len(data)))  # the row each row's samples count towards
    block = []
    for i in range(last_exit + 1, len(data)):
        block.append(i)
        m = re.match(r"\s*BRA\s+(0x[0-9a-f]+)", data[i][1])
        if m:
            back = addr.get(int(m.group(1), 16))
            for k in block:
                owner[k] = back if back is not None else k
            block = []
    samples = collections.Counter()
    executed = collections.Counter()
    reasons = collections.defaultdict(collections.Counter)
    per_row = collections.defaultdict(list)
    for i, r in enumerate(data):
        reg = region_of(min(owner[i], last_exit))
        s = num(r, "Warp Stall Sampling (All Samples)")
        samples[reg] += s
        executed[reg] += num(r, "Instructions Executed")
        for h in stalls:
            reasons[reg][h[len("stall_"):]] += num(r, h)
        per_row[reg].append((s, i))
    total = sum(samples.values()) or 1
    for reg in range(len(starts)):
        top = ", ".join("%s %d" % kv for kv in reasons[reg].most_common(4) if kv[1])
        print("region %d (rows %d..): %d samples (%.1f%%), %d instructions executed; %s"
              % (reg, starts[reg], samples[reg], 100.0 * samples[reg] / total, executed[reg], top))
        for s, i in sorted(per_row[reg], reverse=True)[: a.top]:
            if s:
                print("    %7d  row %5d  %s" % (s, i, data[i][1].strip()[:72]))


if __name__ == "__main__":
    main()
