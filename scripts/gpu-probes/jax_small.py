import os
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
import jax, jax.numpy as jnp
try:
    print("elementwise", float((jnp.arange(6.0) * 2).sum()), flush=True)
except Exception as e:
    print("FAIL", str(e)[:300], flush=True)
a = jnp.arange(256 * 256, dtype=jnp.float32).reshape(256, 256) / 65536.0
try:
    print("matmul", float((a @ a).sum()), flush=True)
except Exception as e:
    print("FAIL", str(e)[:300], flush=True)
