"""Inputs for qmatvec: weights and activations in the int8 range [-127, 127] (stored as
int32), positive per-row scales as a quantizer makes them."""

import numpy as np


def make_inputs(rng, m, n):
    return {"W": rng.integers(-127, 128, size=(m, n)).astype(np.int32),
            "x": rng.integers(-127, 128, size=n).astype(np.int32),
            "scale": (rng.random(m) * 0.01 + 1e-4).astype(np.float32)}
