# JAX's triangular solve (cuBLAS/cuSOLVER) and convolution (cuDNN) alone, for tracing their driver
# calls (jax_diag.sh with PY=this file).
import os
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
import jax, jax.numpy as jnp  # noqa: E401,E402
a = jnp.eye(8) * 2 + jnp.ones((8, 8)) * 0.1
for name, fn in [
    ("linalg solve", lambda: float(jnp.linalg.solve(a, jnp.ones(8)).sum())),
    ("conv", lambda: float(jax.lax.conv(jnp.ones((1, 3, 16, 16)), jnp.ones((4, 3, 3, 3)), (1, 1), "SAME").sum())),
]:
    try:
        print("ok  ", name, fn(), flush=True)
    except Exception as e:  # noqa: BLE001
        print("FAIL", name, str(e).splitlines()[0][:200], flush=True)
