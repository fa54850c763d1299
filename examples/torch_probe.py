"""PyTorch on rgpu, feature by feature: each line says whether one thing works and what it gave.

    rgpu run -- python3 examples/torch_probe.py      (or natively: python3 examples/torch_probe.py)

Run it both ways and compare: a line that differs is a feature that does not yet work remotely.
Values are rounded so that native and remote runs print the same text when both are right.
"""
import sys
import traceback

import torch


def check(name, fn):
    try:
        value = fn()
        print(f"ok   {name}: {value}", flush=True)
    except Exception as e:  # one failing feature must not hide the others
        print(f"FAIL {name}: {type(e).__name__}: {str(e).splitlines()[0][:120]}", flush=True)
        traceback.print_exc(file=sys.stderr)


def r(x, digits=4):
    return round(float(x), digits)


dev = "cuda"
torch.manual_seed(0)
check("available", lambda: (torch.cuda.is_available(), torch.cuda.device_count()))
check("device name", lambda: torch.cuda.get_device_name(0)[:8])
check("elementwise", lambda: r((torch.arange(6.0, device=dev) * 2).sum()))
a = torch.linspace(-1, 1, 256 * 128).reshape(256, 128)
b = torch.linspace(1, -1, 128 * 64).reshape(128, 64)
check("matmul fp32 (cuBLAS)", lambda: r((a.to(dev) @ b.to(dev)).sum().cpu(), 2))
check("matmul fp16 (cuBLASLt)", lambda: r((a.half().to(dev) @ b.half().to(dev)).float().sum().cpu(), 0))
check("bmm", lambda: r(torch.bmm(a.reshape(2, 128, 128).to(dev), a.reshape(2, 128, 128).to(dev)).mean().cpu(), 3))
check("linear + backward", lambda: (lambda l, x: (l(x).sum().backward(), r(l.weight.grad.sum().cpu(), 2))[1])(
    torch.nn.Linear(128, 32).to(dev), a.to(dev)))
img = torch.linspace(0, 1, 2 * 3 * 32 * 32).reshape(2, 3, 32, 32)
check("conv2d (cuDNN)", lambda: r(torch.nn.functional.conv2d(img.to(dev), torch.ones(8, 3, 3, 3, device=dev)).sum().cpu(), 1))
check("batchnorm", lambda: r(torch.nn.BatchNorm2d(3).to(dev)(img.to(dev)).abs().sum().cpu(), 1))
check("fft (cuFFT)", lambda: r(torch.fft.fft(torch.arange(64.0, device=dev)).abs().sum().cpu(), 2))
check("randn (cuRAND/Philox)", lambda: (torch.manual_seed(1), r(torch.randn(1000, device=dev).std().cpu(), 3))[1])
check("softmax + cross entropy", lambda: r(torch.nn.functional.cross_entropy(
    torch.linspace(-2, 2, 40, device=dev).reshape(4, 10), torch.tensor([1, 2, 3, 4], device=dev)).cpu()))


def streams():
    s = torch.cuda.Stream()
    e = torch.cuda.Event(enable_timing=True)
    with torch.cuda.stream(s):
        x = torch.ones(1 << 20, device=dev) * 3
        e.record()
    e.synchronize()
    torch.cuda.synchronize()
    return r(x.sum().cpu())


check("streams and events", streams)


def pinned():
    h = torch.arange(1 << 20, dtype=torch.float32).pin_memory()
    d = h.to(dev, non_blocking=True)
    back = torch.empty_like(h).pin_memory()
    back.copy_(d, non_blocking=True)
    torch.cuda.synchronize()
    return bool(torch.equal(h, back))


check("pinned non-blocking copies", pinned)
check("caching allocator", lambda: (torch.empty(1 << 24, device=dev), torch.cuda.memory_allocated() > 0)[1])
check("multi-device copy", lambda: r(torch.ones(10, device="cuda:0").to("cuda:1").sum().cpu())
      if torch.cuda.device_count() > 1 else "one device")


def compiled():
    f = torch.compile(lambda x: torch.sin(x) * 2 + x.cos())
    return r(f(torch.linspace(0, 1, 1000, device=dev)).sum().cpu(), 3)


check("torch.compile (Triton)", compiled)
