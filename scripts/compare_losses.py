#!/usr/bin/env python3
"""Compares two runs of examples/torch_train.py: every step's loss within a relative tolerance.
    scripts/compare_losses.py native.out rgpu.out [--rel 1e-5]
Prints the worst relative difference and the two step times; exits 1 when a step differs by more
than the tolerance or the runs have different steps."""
import sys


def read(path):
    losses, step_ms = {}, None
    for line in open(path):
        f = line.split()
        if len(f) == 4 and f[0] == "step" and f[2] == "loss":
            losses[int(f[1])] = float(f[3])
        elif len(f) == 2 and f[0] == "step_ms":
            step_ms = float(f[1])
    return losses, step_ms


def main():
    args = sys.argv[1:]
    rel = 1e-5
    if "--rel" in args:
        i = args.index("--rel")
        rel = float(args[i + 1])
        del args[i:i + 2]
    a, ams = read(args[0])
    b, bms = read(args[1])
    worst = 0.0
    for step in sorted(set(a) | set(b)):
        if step not in a or step not in b:
            print(f"step {step} is missing from one run")
            return 1
        worst = max(worst, abs(a[step] - b[step]) / max(abs(a[step]), 1e-30))
    ok = bool(a) and worst <= rel
    ratio = f"{bms / ams:.2f}" if ams and bms else "-"
    print(f"steps {len(a)} worst relative loss difference {worst:.2e} (limit {rel:g}) "
          f"step_ms {ams} vs {bms} (ratio {ratio}) {'same' if ok else 'DIFFERENT'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
