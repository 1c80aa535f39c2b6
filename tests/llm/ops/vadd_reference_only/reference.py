import numpy as np


def reference(x, z, n):
    return {"y": np.add(x, z)}
