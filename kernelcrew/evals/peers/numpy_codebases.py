"""What a NumPy user would write for the functions `make bench` imports from public C code
bases (kernelcrew/evals/bench/codebases.py), keyed by the imported operator's name. Each
takes the operator's inputs (op.yaml names and shapes: an array read and written arrives
as NAME_in), scalars and sizes, and returns its outputs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

Out = dict[str, np.ndarray]


def _atax(A, x, m, n, **_: Any) -> Out:
    a = A[:m, :n]
    tmp = a @ x[:n]
    return {"y": a.T @ tmp, "tmp": tmp}


def _bicg(A, p, r, m, n, **_: Any) -> Out:
    a = A[:n, :m]
    return {"s": r[:n] @ a, "q": a @ p[:m]}


def _mvt(x1_in, x2_in, y_1, y_2, A, n, **_: Any) -> Out:
    a = A[:n, :n]
    return {"x1": x1_in + a @ y_1, "x2": x2_in + a.T @ y_2}


def _gesummv(A, B, x, alpha, beta, n, **_: Any) -> Out:
    tmp = A[:n, :n] @ x[:n]
    return {"tmp": tmp, "y": alpha * tmp + beta * (B[:n, :n] @ x[:n])}


def _gemm(C_in, A, B, alpha, beta, ni, nj, nk, **_: Any) -> Out:
    c = C_in.copy()
    c[:ni, :nj] = alpha * (A[:ni, :nk] @ B[:nk, :nj]) + beta * C_in[:ni, :nj]
    return {"C": c}


def _covariance(data_in, float_n, m, n, **_: Any) -> Out:
    d = data_in.copy()
    mean = d[:n, :m].sum(axis=0) / float_n
    d[:n, :m] -= mean
    cov = np.zeros((m, m), dtype=d.dtype)
    cov[:m, :m] = (d[:n, :m].T @ d[:n, :m]) / (float_n - 1)
    return {"data": d, "cov": cov, "mean": mean}


def _jacobi_2d(A_in, tsteps, n, **_: Any) -> Out:
    a = A_in.copy()
    b = np.full_like(a, np.nan)  # its border is never written
    for _t in range(tsteps):
        b[1:n - 1, 1:n - 1] = 0.2 * (a[1:n - 1, 1:n - 1] + a[1:n - 1, :n - 2] + a[1:n - 1, 2:n]
                                     + a[2:n, 1:n - 1] + a[:n - 2, 1:n - 1])
        a[1:n - 1, 1:n - 1] = 0.2 * (b[1:n - 1, 1:n - 1] + b[1:n - 1, :n - 2] + b[1:n - 1, 2:n]
                                     + b[2:n, 1:n - 1] + b[:n - 2, 1:n - 1])
    return {"A": a, "B": b}


def _gemm_nn(A, B, C_in, ALPHA, M, N, K, lda, ldb, ldc, **_: Any) -> Out:
    if (lda, ldb, ldc) != (K, N, N):
        raise ValueError("the NumPy spelling assumes dense rows (lda=K, ldb=N, ldc=N)")
    return {"C": C_in + ALPHA * (A.reshape(M, K) @ B.reshape(K, N)).reshape(-1)}


def _im2col(data_im, channels, height, width, ksize, stride, pad, **_: Any) -> Out:
    im = np.pad(data_im.reshape(channels, height, width), ((0, 0), (pad, pad), (pad, pad)))
    win = np.lib.stride_tricks.sliding_window_view(im, (ksize, ksize), axis=(1, 2))
    win = win[:, ::stride, ::stride]  # (channels, out_h, out_w, ksize, ksize)
    return {"data_col": np.ascontiguousarray(win.transpose(0, 3, 4, 1, 2)).reshape(-1)}


def _variance(x, mean, batch, filters, spatial, **_: Any) -> Out:
    d = x.reshape(batch, filters, spatial) - mean[None, :, None]
    return {"variance": (d * d).sum(axis=(0, 2)) / np.float32(batch * spatial - 1)}


def _matmul(x, w, n, d, **_: Any) -> Out:
    return {"xout": w.reshape(d, n) @ x}


def _rmsnorm(x, weight, size, **_: Any) -> Out:
    return {"o": weight * (x / np.sqrt(np.mean(x * x) + np.float32(1e-5)))}


def _softmax(x_in, **_: Any) -> Out:
    e = np.exp(x_in - x_in.max())
    return {"x": e / e.sum()}


CODEBASE_EXPRESSIONS: dict[str, list[tuple[str, Callable[..., Out]]]] = {
    "polybench_kernel_atax": [("tmp = A @ x; A.T @ tmp", _atax)],
    "polybench_kernel_bicg": [("r @ A, A @ p", _bicg)],
    "polybench_kernel_mvt": [("x1 + A @ y1, x2 + A.T @ y2", _mvt)],
    "polybench_kernel_gesummv": [("alpha * A @ x + beta * B @ x", _gesummv)],
    "polybench_kernel_gemm": [("alpha * A @ B + beta * C", _gemm)],
    "polybench_kernel_covariance": [("d = data - mean; d.T @ d / (n - 1)", _covariance)],
    "polybench_kernel_jacobi_2d": [("tsteps x two 5-point slices", _jacobi_2d)],
    "darknet_gemm_nn": [("C + ALPHA * A @ B", _gemm_nn)],
    "darknet_im2col_cpu": [("np.pad + sliding_window_view", _im2col)],
    "darknet_variance_cpu": [("((x - mean)**2).sum((0, 2)) / (b*s - 1)", _variance)],
    "llama2c_matmul": [("w @ x", _matmul)],
    "llama2c_rmsnorm": [("w * x / sqrt(mean(x*x) + eps)", _rmsnorm)],
    "llama2c_softmax": [("e = exp(x - max); e / e.sum()", _softmax)],
}
