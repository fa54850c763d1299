#!/usr/bin/env python3
"""Checks rgpu's libcudart.so.13 against docs/compatibility.md.

Every export that is still a weak stub (logs its name once, returns cudaErrorNotSupported) must be
listed there: in the `stubs-by-design` block (shell-style patterns: graphics interop and the like)
or by name in the `stubs-not-yet` block.  A name in `stubs-not-yet` that is implemented now must
leave the list, so the list only shrinks as the runtime grows.  With PREFIX (`driver-` for
libcuda.so.1) the blocks are `PREFIXstubs-by-design` and `PREFIXstubs-not-yet`.

    check_stubs.py LIBRARY COMPATIBILITY_MD [PREFIX]
"""
import fnmatch
import re
import subprocess
import sys


def block(text, tag):
    m = re.search(r"```" + tag + r"\n(.*?)```", text, re.S)
    if not m:
        sys.exit(f"check_stubs: no ```{tag} block in the compatibility page")
    return [w for w in m.group(1).split() if w]


def main():
    lib, doc = sys.argv[1], sys.argv[2]
    prefix = sys.argv[3] if len(sys.argv) > 3 else ""
    out = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True,
                         check=True).stdout
    weak, strong = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) != 3:
            continue
        name = parts[2].split("@")[0]
        (weak if parts[1] in "Ww" else strong).add(name)
    text = open(doc, encoding="utf-8").read()
    design = block(text, prefix + "stubs-by-design")
    not_yet = set(block(text, prefix + "stubs-not-yet"))
    errors = []
    for name in sorted(weak):
        if name in not_yet or any(fnmatch.fnmatchcase(name, p) for p in design):
            continue
        errors.append(f"{name} is still a stub, but {doc} does not list it")
    for name in sorted(not_yet):
        if name in strong:
            errors.append(f"{name} is implemented now: remove it from the {prefix}stubs-not-yet list")
        elif name not in weak:
            errors.append(f"{name} ({prefix}stubs-not-yet) is not exported at all")
    for e in errors:
        print("check_stubs:", e)
    print(f"check_stubs: {len(strong)} exports implemented, {len(weak)} stubs "
          f"({len(weak) - len(weak & not_yet)} by design, {len(weak & not_yet)} not yet)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
