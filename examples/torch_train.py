"""A training loop on synthetic data, deterministic, for comparing a remote GPU with a local one.

    rgpu run -- python3 examples/torch_train.py --model cnn --steps 200
    python3 examples/torch_train.py --model cnn --steps 200          (natively)

Prints one line per step ("step N loss X", 9 significant digits) and, last, the median step time
("step_ms M") measured over the steps after the first five.  Two runs of the same model and steps
give the same losses natively and through rgpu (compare them with scripts/compare_losses.py).
Models: `cnn`, a small convolutional network on 3x32x32 images, batch 64; `transformer`, a
4-layer, 512-wide encoder on sequences of 256 tokens, batch 32.
"""
import argparse
import os
import statistics
import time

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402


def cnn():
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(128, 10))


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(1000, 512)
        layer = nn.TransformerEncoderLayer(512, 8, 2048, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 4, enable_nested_tensor=False)
        self.head = nn.Linear(512, 10)

    def forward(self, x):
        return self.head(self.encoder(self.embed(x)).mean(dim=1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["cnn", "transformer"], default="cnn")
    ap.add_argument("--steps", type=int, default=200)
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    torch.use_deterministic_algorithms(True)
    dev = torch.device("cuda")
    model = (cnn() if args.model == "cnn" else Encoder()).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(1)
    if args.model == "cnn":  # 8 fixed batches, made on the host: the same data every run
        data = [(torch.randn(64, 3, 32, 32, generator=g), torch.randint(0, 10, (64,), generator=g))
                for _ in range(8)]
    else:
        data = [(torch.randint(0, 1000, (32, 256), generator=g), torch.randint(0, 10, (32,), generator=g))
                for _ in range(4)]
    data = [(x.to(dev), y.to(dev)) for x, y in data]
    loss_fn = nn.CrossEntropyLoss()
    times = []
    for step in range(args.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        x, y = data[step % len(data)]
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        value = loss.item()  # synchronizes
        times.append(time.perf_counter() - t0)
        print(f"step {step} loss {value:.9g}", flush=True)
    warm = times[5:] or times
    print(f"step_ms {statistics.median(warm) * 1e3:.3f}", flush=True)


if __name__ == "__main__":
    main()
