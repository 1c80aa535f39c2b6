def reference(x, z, n):
    return {"y": x + z}
