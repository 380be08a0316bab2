#!/usr/bin/env python3
"""Prints what limits a kernel from an Nsight Compute report (ncu --set full): the tensor and
special-function pipes' utilisation, issue activity, memory throughput and the top warp stall
reasons (cycles per issued instruction). Usage: scripts/ncu_summary.py REPORT.ncu-rep..."""
import csv
import io
import re
import subprocess
import sys

# (label, metric) pairs, read from ncu's raw page; missing ones are skipped.
METRICS = [
    ("duration (us)", "gpu__time_duration.sum"),
    ("XU pipe (MUFU ex2) %", "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active"),
    ("FMA pipe %", "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"),
    ("ALU pipe %", "sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active"),
    ("issue active %", "smsp__issue_active.avg.pct_of_peak_sustained_active"),
    ("DRAM throughput %", "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"),
    ("L2 throughput %", "lts__t_sectors.avg.pct_of_peak_sustained_elapsed"),
    ("SM active cycles %", "sm__cycles_active.avg.pct_of_peak_sustained_elapsed"),
]
# Per-pipe utilisation (the tensor pipes' names differ between ncu versions) and warp stall
# reasons in cycles per issued instruction.
PIPE = re.compile(r"sm__pipe_tensor.*cycles_active\.avg\.pct_of_peak_sustained_active$")
STALL = re.compile(r"smsp__average_warps?_issue_stalled_(\w+)_per_issue_active\.ratio$")


def raw_metrics(report):
    text = subprocess.run(["ncu", "--import", report, "--page", "raw", "--csv"],
                          capture_output=True, text=True, check=True).stdout
    rows = list(csv.reader(io.StringIO(text)))
    names, values = rows[0], rows[2]  # rows[1] holds the units
    return dict(zip(names, values))


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


for report in sys.argv[1:]:
    metrics = raw_metrics(report)
    print(f"=== {report}")
    for label, name in METRICS:
        if name in metrics:
            print(f"  {label:32s} {metrics[name]}")
    for name, value in sorted(metrics.items()):
        if PIPE.match(name):
            print(f"  {name:70s} {value}")
    stalls = []
    for name, value in metrics.items():
        match = STALL.match(name)
        v = number(value) if match else None
        if v is not None:
            stalls.append((v, match.group(1)))
    for v, reason in sorted(stalls, reverse=True)[:8]:
        print(f"  stall {reason:38s} {v:6.2f} cycles/instr")
