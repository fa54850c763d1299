"""PyTorch moving tensors between two GPUs (through rgpu: GPUs of two servers, RGPU_SERVERS=A,B).
Prints one line per check (the same natively and through rgpu when the copies are right) and,
to stderr, the time of a 256 MiB copy each way.
  python3 scripts/gpu-probes/torch_peer.py"""
import time

import torch

assert torch.cuda.device_count() >= 2, "needs two devices"
print("peer access 0->1:", torch.cuda.can_device_access_peer(0, 1))
g = torch.Generator(device="cuda:0").manual_seed(7)
for n in [1, 1000, 1 << 18, (1 << 26) + 13]:  # elements of float32: 4 B to 256 MiB + 52 B
    x = torch.rand(n, device="cuda:0", generator=g)
    y = x.to("cuda:1")  # device 0 -> device 1
    z = (y * 2).to("cuda:0")  # back, after a kernel on device 1
    print(f"{n:>9} elements: sum {x.double().sum().item():.6f}, to cuda:1 equal "
          f"{torch.equal(y.cpu(), x.cpu())}, back equal {torch.equal(z, x * 2)}")
# Non-blocking copies on a side stream, ordered by events.
s = torch.cuda.Stream(device="cuda:1")
x = torch.arange(1 << 20, device="cuda:0", dtype=torch.float32)
with torch.cuda.stream(s):
    y = x.to("cuda:1", non_blocking=True)
    y.mul_(3)
s.synchronize()
print("stream copy then kernel:", torch.equal(y.cpu(), (x * 3).cpu()))
# A slice (offset, strided rows) of a 2-D tensor.
m = torch.rand(1024, 1024, device="cuda:0", generator=g)
print("column slice:", torch.equal(m[:, 100:300].to("cuda:1").cpu(), m[:, 100:300].cpu()))
for src, dst in [("cuda:0", "cuda:1"), ("cuda:1", "cuda:0")]:
    big = torch.empty(1 << 26, device=src)
    big.to(dst)
    torch.cuda.synchronize(src)
    torch.cuda.synchronize(dst)
    t = time.perf_counter()
    for _ in range(10):
        big.to(dst)
    torch.cuda.synchronize(dst)
    dt = (time.perf_counter() - t) / 10
    import sys
    print(f"256 MiB {src} -> {dst}: {dt * 1e3:.3f} ms ({(1 << 28) / dt / 1e9:.1f} GB/s)", file=sys.stderr)
