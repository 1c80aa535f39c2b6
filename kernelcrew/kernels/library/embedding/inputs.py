"""Inputs for embedding: token ids drawn uniformly from the vocabulary [0, V)."""

import numpy as np


def make_inputs(rng, B, T, C, V):
    return {"inp": rng.integers(0, V, size=(B, T)).astype(np.int32),
            "wte": rng.standard_normal((V, C)).astype(np.float32),
            "wpe": rng.standard_normal((T, C)).astype(np.float32)}
