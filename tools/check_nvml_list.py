#!/usr/bin/env python3
"""Checks rgpu's libnvidia-ml.so.1 against docs/compatibility.md.

The ```nvml-implemented block lists exactly the NVML functions the library answers (its strong
exports); every other export is a weak stub (NVML_ERROR_NOT_SUPPORTED, frontend/nvml/
unsupported.cc).  An implemented function missing from the list, or a listed one that is a stub,
fails the check.  Every export must be an NVML name.

    check_nvml_list.py LIBRARY COMPATIBILITY_MD
"""
import re
import subprocess
import sys


def main():
    lib, doc = sys.argv[1], sys.argv[2]
    out = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True,
                         check=True).stdout
    weak, strong = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) != 3:
            continue
        (weak if parts[1] in "Ww" else strong).add(parts[2].split("@")[0])
    text = open(doc, encoding="utf-8").read()
    m = re.search(r"```nvml-implemented\n(.*?)```", text, re.S)
    if not m:
        sys.exit("check_nvml_list: no ```nvml-implemented block in the compatibility page")
    listed = set(m.group(1).split())
    errors = []
    for name in sorted(weak | strong):
        if not name.startswith("nvml"):
            errors.append(f"{name}: exported, but not an NVML name")
    for name in sorted(strong - listed):
        errors.append(f"{name}: implemented, but not in the nvml-implemented list")
    for name in sorted(listed - strong):
        errors.append(f"{name}: listed as implemented, but " +
                      ("a stub" if name in weak else "not exported"))
    for e in errors:
        print("check_nvml_list: " + e)
    print(f"check_nvml_list: {len(strong)} implemented, {len(weak)} stubs")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
