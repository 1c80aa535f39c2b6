import numpy as np


def reference(x, g, n):
    return {"y": np.exp(x) * g}
