#!/usr/bin/env python3
"""Write real Flax (JAX) transformer profiles on a GPU as a TensorBoard logdir.

    python3 scripts/device/capture_flax_profiles.py LOGDIR

Runs (each one's profile lands in LOGDIR/<run>/plugins/profile/<session>/<host>.xplane.pb),
a small decoder-only language model (embedding, pre-norm blocks of self-attention and an MLP,
a final norm and head), optax AdamW, a jitted train step, steps 1-3 each in a
`jax.profiler.StepTraceAnnotation("train", step_num=n)` after a warm-up step outside the trace:

* flax_lm: four blocks written out (`block_0` .. `block_3`), no donation;
* flax_lm_scan: the blocks under `nn.scan(nn.remat(...))` (one `blocks` scope, a while loop in
  the program, activations recomputed in the backward pass), parameters and optimizer state
  donated (`donate_argnums`), as large models are trained.

What XLA places in each program's blocks is read from the HLO the profile keeps
(tb_memory_plugin/sources/xplane/hlo.py). Each run is wrapped: one failing does not stop the other.
"""

from __future__ import annotations

import os
import sys
import time
import traceback


def build(scan: bool):
    import flax.linen as nn

    class Block(nn.Module):
        d: int
        heads: int

        @nn.compact
        def __call__(self, x):
            h = nn.LayerNorm(name="ln1")(x)
            h = nn.MultiHeadDotProductAttention(num_heads=self.heads, name="attn")(h, h)
            x = x + h
            h = nn.LayerNorm(name="ln2")(x)
            h = nn.Dense(4 * self.d, name="mlp_in")(h)
            h = nn.gelu(h)
            return x + nn.Dense(self.d, name="mlp_out")(h)

    class Scanned(nn.Module):
        d: int
        heads: int

        @nn.compact
        def __call__(self, x, _):
            return Block(self.d, self.heads, name="block")(x), None

    class LM(nn.Module):
        vocab: int = 1000
        d: int = 256
        layers: int = 4

        @nn.compact
        def __call__(self, tokens):
            x = nn.Embed(self.vocab, self.d, name="embed")(tokens)
            if scan:
                blocks = nn.scan(nn.remat(Scanned), variable_axes={"params": 0}, split_rngs={"params": True},
                                 length=self.layers)
                x, _ = blocks(self.d, 4, name="blocks")(x, None)
            else:
                for i in range(self.layers):
                    x = Block(self.d, 4, name=f"block_{i}")(x)
            x = nn.LayerNorm(name="ln_f")(x)
            return nn.Dense(self.vocab, name="head")(x)

    return LM()


def capture(logdir: str, run: str, scan: bool) -> None:
    import jax
    import jax.numpy as jnp
    import optax

    model = build(scan)
    tokens = jax.random.randint(jax.random.PRNGKey(1), (16, 129), 0, 1000)
    params = model.init(jax.random.PRNGKey(0), tokens[:, :-1])["params"]
    tx = optax.adamw(1e-3)
    opt_state = tx.init(params)

    def loss_fn(p, batch):
        logits = model.apply({"params": p}, batch[:, :-1])
        return optax.softmax_cross_entropy_with_integer_labels(logits, batch[:, 1:]).mean()

    def train_step(p, state, batch):
        loss, grads = jax.value_and_grad(loss_fn)(p, batch)
        updates, state = tx.update(grads, state, p)
        return optax.apply_updates(p, updates), state, loss

    step = jax.jit(train_step, donate_argnums=(0, 1) if scan else ())
    params, opt_state, loss = step(params, opt_state, tokens)  # compiled outside the profile
    jax.block_until_ready(loss)
    jax.profiler.start_trace(os.path.join(logdir, run))
    for n in range(1, 4):
        with jax.profiler.StepTraceAnnotation("train", step_num=n):
            params, opt_state, loss = step(params, opt_state, tokens)
            jax.block_until_ready(loss)
    jax.profiler.stop_trace()
    print(f"{run}: loss {float(loss):.4f} on {jax.devices()[0]}, params "
          f"{sum(x.size for x in jax.tree_util.tree_leaves(params)):,}", flush=True)
    del jnp


def main() -> int:
    logdir = sys.argv[1]
    failed = 0
    for run, scan in (("flax_lm", False), ("flax_lm_scan", True)):
        start = time.time()
        try:
            capture(logdir, run, scan)
        except Exception:  # noqa: BLE001 - report, go on with the next run
            traceback.print_exc()
            failed += 1
        print(f"{run}: {time.time() - start:.1f} s", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
