"""Where a PyTorch step's time goes, natively or through rgpu: per-operation CPU cost of small
operations (each one launch), the round trips of synchronization, and the small CNN's step split
into phases.  Run it natively and through rgpu and compare the columns.
    python3 scripts/gpu-probes/torch_ops.py [--profile]
"""
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def per_op(fn, n, sync=True):
    """Median over 5 rounds of the CPU time per call of fn (issued back to back), µs."""
    res = []
    for _ in range(5):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        t1 = time.perf_counter()
        if sync:
            torch.cuda.synchronize()
        res.append((t1 - t0) / n * 1e6)
    return statistics.median(res)


def main():
    dev = torch.device("cuda")
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    x = torch.zeros(1024, device=dev)
    img = torch.randn(64, 32, 16, 16, device=dev)
    w = torch.randn(64, 32, 3, 3, device=dev)
    a = torch.randn(64, 128, device=dev)
    b = torch.randn(128, 10, device=dev)
    s = torch.cuda.Stream()
    ev = torch.cuda.Event()
    rows = [
        ("add_ (1 launch)", lambda: x.add_(1.0), 2000),
        ("empty 4 KiB (cached)", lambda: torch.empty(1024, device=dev), 2000),
        ("conv2d fwd 64x32x16x16", lambda: F.conv2d(img, w, padding=1), 300),
        ("matmul 64x128x10", lambda: a @ b, 1000),
        ("relu", lambda: F.relu(img), 1000),
        ("event record", lambda: ev.record(), 2000),
        ("stream wait event", lambda: s.wait_event(ev), 2000),
        ("torch.cuda.synchronize", torch.cuda.synchronize, 500),
        ("x[0].item()", lambda: x[0].item(), 500),
        ("current_device", torch.cuda.current_device, 5000),
    ]
    for name, fn, n in rows:
        print(f"op {name:28s} {per_op(fn, n):9.2f} us", flush=True)

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(128, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    xs = torch.randn(64, 3, 32, 32, device=dev)
    ys = torch.randint(0, 10, (64,), device=dev)
    loss_fn = nn.CrossEntropyLoss()
    phases = {k: [] for k in ("zero_grad", "forward", "backward", "step", "item", "total")}
    for i in range(120):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        t1 = time.perf_counter()
        loss = loss_fn(model(xs), ys)
        t2 = time.perf_counter()
        loss.backward()
        t3 = time.perf_counter()
        opt.step()
        t4 = time.perf_counter()
        loss.item()
        t5 = time.perf_counter()
        if i >= 20:
            for k, v in zip(phases, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t5 - t0)):
                phases[k].append(v)
    for k, v in phases.items():
        print(f"cnn {k:10s} {statistics.median(v) * 1e3:8.3f} ms", flush=True)

    if "--profile" in sys.argv:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(20):
                opt.zero_grad(set_to_none=True)
                loss = loss_fn(model(xs), ys)
                loss.backward()
                opt.step()
                loss.item()
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30))


if __name__ == "__main__":
    main()
