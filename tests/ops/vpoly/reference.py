import numpy as np

COEFFS = [0.0078125, 0.015625, -0.03125, 0.0625, -0.125, 0.25, -0.5, 1.0, 0.5]


def reference(x, n):
    p = np.zeros_like(x, dtype=np.float64)
    for c in COEFFS:
        p = p * x + c
    return {"y": p}
