def reference(x, z, a, n):
    return {"y": a * x + z}
