"""Inputs for histogram: bin indices in [0, bins), skewed towards a few bins as real data is
(a rounded normal around the middle), so many increments hit the same counter in a row."""

import numpy as np


def make_inputs(rng, n, bins):
    v = np.rint(rng.normal(bins / 2.0, max(bins / 16.0, 0.5), size=n))
    return {"values": np.clip(v, 0, bins - 1).astype(np.int32)}
