# gdb script: breaks on the driver entry points of rgpu's libcuda.so.1 whose names start with one of
# RGPU_TRACE_PREFIXES (default: memory, pointer and tensor-map calls) and prints each call that
# returns an error other than "not ready", with its first five arguments and, the first
# RGPU_TRACE_STACKS times per name and error, the caller's stack; allocations (cuMemAlloc*) are
# printed with their size and address.  Used by jax_diag.sh.
import gdb, os, subprocess

lib = os.environ["RGPU_CU_LIB"]
prefixes = tuple(os.environ.get("RGPU_TRACE_PREFIXES", "cuMem,cuPointer,cuTensorMap").split(","))
names = [l.split()[2] for l in subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True,
         text=True).stdout.splitlines() if len(l.split()) == 3 and l.split()[2].startswith(prefixes)]
# The hottest calls, which never fail here, are left out (each break costs the run time).
skip = {"cuCtxGetCurrent", "cuCtxSetCurrent", "cuCtxPushCurrent", "cuCtxPushCurrent_v2",
        "cuCtxPopCurrent", "cuCtxPopCurrent_v2", "cuGetProcAddress", "cuGetProcAddress_v2",
        "cuDriverGetVersion", "cuDeviceGetAttribute", "cuStreamQuery", "cuEventQuery",
        "cuGetErrorName", "cuGetErrorString", "cuGetExportTable", "cuCtxGetDevice"}
names = [n for n in names if n not in skip]
shown = {}
limit = int(os.environ.get("RGPU_TRACE_STACKS", "2"))
regs = ("rdi", "rsi", "rdx", "rcx", "r8")


def reg(r):
    return int(gdb.parse_and_eval("$" + r)) & 0xffffffffffffffff


class Done(gdb.FinishBreakpoint):
    def __init__(self, frame, name, args):
        super().__init__(frame, internal=True)
        self.name, self.args = name, args

    def stop(self):
        rc = reg("rax") & 0xffffffff
        a = " ".join(hex(x) for x in self.args)
        if self.name.startswith("cuMemAlloc") and rc == 0:
            out = int(gdb.parse_and_eval(f"*(unsigned long*){self.args[0]}"))
            print(f"ALLOC {self.name} size {self.args[1]:#x} -> {out & 0xffffffffffffffff:#x}", flush=True)
        if rc not in (0, 600):
            n = shown.get((self.name, rc), 0)
            shown[(self.name, rc)] = n + 1
            print(f"CUERR {self.name}({a}) -> {rc} (#{n + 1})", flush=True)
            if n < limit:
                f, i = gdb.newest_frame(), 0
                while f is not None and i < 8:
                    print(f"   #{i} {f.name() or hex(f.pc())}", flush=True)
                    f, i = f.older(), i + 1
        return False

    def out_of_scope(self):
        pass


class Entry(gdb.Breakpoint):
    def stop(self):
        try:
            Done(gdb.newest_frame(), self.location, [reg(r) for r in regs])
        except Exception:
            pass
        return False


for n in names:
    Entry(n, internal=True)
