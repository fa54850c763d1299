# JAX on rgpu: one line per feature ("ok NAME VALUE" or "FAIL NAME ERROR"), the same natively and
# through rgpu (scripts/gpu-probes/jax_probe.sh runs both and compares).
import os
import sys
import traceback

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
failures = 0


def check(name, fn):
    global failures
    try:
        print(f"ok   {name} {fn()}", flush=True)
    except Exception as e:  # noqa: BLE001 - report every failure and go on
        failures += 1
        print(f"FAIL {name} {type(e).__name__}: {str(e).splitlines()[0][:200]}", flush=True)
        traceback.print_exc(file=sys.stderr)


import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

r = lambda x, d=3: round(float(x), d)  # noqa: E731
check("devices", lambda: [d.platform for d in jax.devices()])
check("elementwise", lambda: r((jnp.arange(6.0) * 2).sum()))
a = jnp.arange(256 * 256, dtype=jnp.float32).reshape(256, 256) / 65536.0
check("matmul fp32", lambda: r((a @ a).sum(), 1))
check("matmul bf16", lambda: r((a.astype(jnp.bfloat16) @ a.astype(jnp.bfloat16)).astype(jnp.float32).sum(), -1))
check("jit", lambda: r(jax.jit(lambda x: jnp.tanh(x) * 3 + 1)(a).mean()))
check("grad", lambda: r(jax.grad(lambda x: (jnp.sin(x) ** 2).sum())(a).sum(), 2))
img = jnp.ones((2, 3, 16, 16))
ker = jnp.ones((8, 3, 3, 3))
check("conv", lambda: r(jax.lax.conv(img, ker, (1, 1), "SAME").sum(), 1))
check("fft", lambda: r(jnp.abs(jnp.fft.fft(jnp.arange(64.0))).sum(), 2))
check("random", lambda: r(jax.random.normal(jax.random.PRNGKey(1), (1000,)).std()))
check("linalg solve", lambda: r(jnp.linalg.solve(a @ a.T + jnp.eye(256), jnp.ones(256)).sum(), 3))
check("host copy", lambda: int(jax.device_get(jnp.arange(1 << 20)).sum()))


def train():
    key = jax.random.PRNGKey(0)
    w = jax.random.normal(key, (64, 10)) * 0.1
    x = jax.random.normal(jax.random.PRNGKey(2), (128, 64))
    y = jax.random.randint(jax.random.PRNGKey(3), (128,), 0, 10)

    def loss(w):
        logits = x @ w
        return -jnp.mean(jax.nn.log_softmax(logits)[jnp.arange(128), y])

    step = jax.jit(lambda w: w - 0.1 * jax.grad(loss)(w))
    for _ in range(50):
        w = step(w)
    return r(loss(w), 4)


check("train 50 steps", train)
print(f"jax_probe: {failures} failures", flush=True)
sys.exit(1 if failures else 0)
