"""Each operator's idiomatic NumPy spelling: what a NumPy user would write for it."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from kernelcrew.evals.peers.numpy_codebases import CODEBASE_EXPRESSIONS


def _softmax(x: np.ndarray, **_: Any) -> dict[str, np.ndarray]:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return {"y": e / e.sum(axis=1, keepdims=True)}


def _gelu_muladd(x, r, s, t, **_: Any) -> dict[str, np.ndarray]:
    from scipy.special import erf  # NumPy has no erf; SciPy comes with Kernel Tuner

    v = x + r
    return {"y": np.float32(0.5) * v * (np.float32(1) + erf(v * np.float32(math.sqrt(0.5))))
            * s + t}


# op name -> [(label, expression)]: the idiomatic spelling(s) a NumPy user would write. Where
# there are two, both are timed and the faster one is the peer.
NUMPY_EXPRESSIONS: dict[str, list[tuple[str, Callable[..., dict[str, np.ndarray]]]]] = {
    "transpose": [("np.ascontiguousarray(x.T)", lambda x, **_: {"y": np.ascontiguousarray(x.T)})],
    "small_matmul": [("np.matmul(a, b)", lambda a, b, **_: {"c": np.matmul(a, b)})],
    "softmax_rows": [("e = np.exp(x - x.max(1, keepdims=True)); e / e.sum(1, keepdims=True)",
                      _softmax)],
    "rmsnorm": [("x / np.sqrt(np.mean(x * x, 1, keepdims=True) + eps) * w",
                 lambda x, w, eps, **_: {"y": x / np.sqrt(np.mean(x * x, axis=1, keepdims=True)
                                                          + eps) * w})],
    "scale_shift_sum": [
        ("(a * x + b).sum(1)", lambda x, a, b, **_: {"out": (a * x + b).sum(axis=1)}),
        ("a * x.sum(1) + b * cols", lambda x, a, b, cols, **_: {
            "out": a * x.sum(axis=1) + b * np.float32(cols)}),
    ],
    "add_gelu_muladd": [("0.5 * v * (1 + scipy.special.erf(v / sqrt(2))) * s + t, v = x + r",
                         _gelu_muladd)],
    "vadd": [("x + z", lambda x, z, **_: {"y": x + z})],
}


def _gelu_tanh(x, **_: Any) -> dict[str, np.ndarray]:
    c = np.float32(math.sqrt(2.0 / math.pi))
    return {"y": np.float32(0.5) * x * (np.float32(1) + np.tanh(
        c * (x + np.float32(0.044715) * x * x * x)))}


def _layernorm(inp, weight, bias, **_: Any) -> dict[str, np.ndarray]:
    m = inp.mean(axis=-1)
    xc = inp - m[..., None]
    rs = np.float32(1) / np.sqrt((xc * xc).mean(axis=-1) + np.float32(1e-5))
    return {"out": xc * rs[..., None] * weight + bias, "mean": m, "rstd": rs}


def _stencil5(u, c0, c1, **_: Any) -> dict[str, np.ndarray]:
    v = u.copy()
    if u.shape[0] > 2 and u.shape[1] > 2:
        v[1:-1, 1:-1] = c0 * u[1:-1, 1:-1] + c1 * (u[:-2, 1:-1] + u[2:, 1:-1]
                                                  + u[1:-1, :-2] + u[1:-1, 2:])
    return {"v": v}


def _conv1d_causal(x, w, bias, K, **_: Any) -> dict[str, np.ndarray]:
    L = x.shape[2]
    xp = np.pad(x, ((0, 0), (0, 0), (K - 1, 0)))
    out = np.broadcast_to(bias[None, :, None], x.shape).copy()
    for k in range(K):
        out += w[None, :, k, None] * xp[:, :, k:k + L]
    return {"out": out}


def _conv2d(x, w, bias, **_: Any) -> dict[str, np.ndarray]:
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))  # N,C,H,W,3,3
    y = np.tensordot(win, w, axes=([1, 4, 5], [1, 2, 3]))  # N,H,W,Cout
    return {"y": np.ascontiguousarray(y.transpose(0, 3, 1, 2)) + bias[None, :, None, None]}


def _attention(q, k, v, scale, **_: Any) -> dict[str, np.ndarray]:
    s = (q @ k.transpose(0, 2, 1)) * scale
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    return {"out": p @ v}


NUMPY_EXPRESSIONS.update({
    "gelu_tanh": [("0.5 * x * (1 + np.tanh(sqrt(2/pi) * (x + 0.044715 * x**3)))", _gelu_tanh)],
    "layernorm": [("xc = x - x.mean(-1); xc / np.sqrt((xc * xc).mean(-1) + eps) * w + b",
                   _layernorm)],
    "matvec": [("A @ x", lambda A, x, **_: {"y": A @ x})],
    "matvec_t": [("x @ a", lambda a, x, **_: {"y": x @ a})],
    "colsum": [("x.sum(0)", lambda x, **_: {"out": x.sum(axis=0)})],
    "stencil5": [("v = u.copy(); v[1:-1, 1:-1] = c0 * u[1:-1, 1:-1] + c1 * (4 shifted slices)",
                  _stencil5)],
    "cumsum_rows": [("np.cumsum(x, axis=1)", lambda x, **_: {"y": np.cumsum(x, axis=1)})],
    "histogram": [("np.bincount(values, minlength=bins)", lambda values, bins, **_: {
        "counts": np.bincount(values, minlength=bins).astype(np.int32)})],
    "ddot": [("np.dot(x, y)", lambda x, y, **_: {"r": np.array([np.dot(x, y)])})],
    "embedding": [("wte[inp] + wpe", lambda inp, wte, wpe, **_: {"out": wte[inp] + wpe})],
    "conv1d_causal": [("sum over k of w[:, k] * (x padded by K-1 on the left)[..., k:k+L]",
                       _conv1d_causal)],
    "conv2d": [("np.tensordot(sliding_window_view(padded x, (3, 3)), w, 3 axes) + bias",
                _conv2d)],
    "attention": [("p = softmax(q @ k^T * scale); p @ v", _attention)],
    "qmatvec": [("scale * (W @ x).astype(np.float32)", lambda W, x, scale, **_: {
        "y": scale * (W @ x).astype(np.float32)})],
})

# the functions `make bench` imports from public C code bases
NUMPY_EXPRESSIONS.update(CODEBASE_EXPRESSIONS)
