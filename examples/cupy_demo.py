"""CuPy on a remote GPU through rgpu: elementwise and reduction kernels (compiled by NVRTC on the
client, loaded by rgpu's driver), a raw kernel, streams and events. Prints results that do not
depend on where the GPU is, so its output through rgpu must equal its output natively.

    rgpu run python3 examples/cupy_demo.py        (or with LD_LIBRARY_PATH=<rgpu>/lib)
"""
import cupy as cp

n = 1 << 20
x = cp.arange(n, dtype=cp.float32)
y = cp.ones(n, dtype=cp.float32)

# Elementwise (NVRTC-compiled by CuPy) and reductions.
z = 2.0 * x + y
print("saxpy sum", float(z.sum()))
print("max", float(z.max()), "argmax", int(z.argmax()))
print("mean of squares", float((x[:1000] ** 2).mean()))

# A user elementwise kernel and a raw kernel.
square_diff = cp.ElementwiseKernel("float32 a, float32 b", "float32 c", "c = (a - b) * (a - b)",
                                   "square_diff")
print("square_diff sum", float(square_diff(x[:4096], y[:4096]).sum()))
sum_sq = cp.ReductionKernel("float32 v", "float64 s", "v * v", "a + b", "s = a", "0", "sum_sq",
                            reduce_type="double")
print("reduction kernel sum_sq", float(sum_sq(x[:1000])))  # 332833500
add = cp.RawKernel(r'''
extern "C" __global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockDim.x * blockIdx.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}''', "add")
c = cp.empty_like(x)
add(((n + 255) // 256,), (256,), (x, y, c, cp.int32(n)))
print("raw kernel ok", bool(cp.allclose(c, x + 1)))

# Streams and events.
s = cp.cuda.Stream(non_blocking=True)
start, end = cp.cuda.Event(), cp.cuda.Event()
with s:
    start.record()
    w = cp.sqrt(x + 1.0)
    end.record()
end.synchronize()
print("stream result", float(w[:10].sum()))
print("event elapsed measured", cp.cuda.get_elapsed_time(start, end) >= 0)
# A second stream waits for an event recorded on the first.
s2 = cp.cuda.Stream(non_blocking=True)
done = cp.cuda.Event()
with s:
    v = x * 3.0
    done.record()
s2.wait_event(done)
with s2:
    print("stream wait_event sum", float(v[:100].sum()))  # 14850
s2.synchronize()
print("event done", done.done)

# Matrix product (cuBLAS, if this CuPy uses it) and host round trip.
a = cp.arange(64 * 64, dtype=cp.float64).reshape(64, 64) / 4096
print("matmul trace", round(float(cp.trace(a @ a)), 6))
print("to host", cp.asnumpy(x[:5]).tolist())
print("cupy demo: done")
