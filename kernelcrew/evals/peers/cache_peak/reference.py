"""Reference for the bandwidth probe: a = b + s * c, in float64."""

import numpy as np


def reference(**kw) -> dict[str, np.ndarray]:
    return {"a": np.asarray(kw["b"]) + float(kw["s"]) * np.asarray(kw["c"])}
