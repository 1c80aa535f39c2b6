"""CUDA block-level pieces that several moves write or read: the block-wide reduction
helpers (`kc_block_reduce`: warp shuffles, one shared-memory stage), where they go in a
file, and the shared-memory tree reduction that older code writes by hand
(`for (s = blockDim.x / 2; s > 0; s >>= 1) { if (t < s) B[t] += B[t + s];
__syncthreads(); }`)."""

from __future__ import annotations

import re

from kernelcrew.csource.syntax import Edit, Node, Source, declarators, lookup

HELPERS_MARK = "kc_block_reduce"
HELPERS = r"""// kernelcrew: block-wide reductions. Warp shuffles reduce each warp (lanes past the
// block's end are left out), one shared-memory stage combines the warps, and every
// thread gets the result. Every thread of the block must call it (it synchronizes).
struct kc_op_sum { template <class T> __device__ static T f(T a, T b) { return a + b; } };
struct kc_op_max { template <class T> __device__ static T f(T a, T b) { return a > b ? a : b; } };
struct kc_op_min { template <class T> __device__ static T f(T a, T b) { return a < b ? a : b; } };

template <class Op, class T>
__device__ __forceinline__ T kc_warp_reduce(T v, int lane, int count, unsigned mask) {
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        T w = __shfl_down_sync(mask, v, o);
        if (lane + o < count) v = Op::f(v, w);
    }
    return v;
}

template <class Op, class T>
__device__ __forceinline__ T kc_block_reduce(T v) {
    __shared__ T kc_part[32];
    const int n = blockDim.x * blockDim.y * blockDim.z;
    const int t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    const int lane = t & 31, warp = t >> 5, warps = (n + 31) >> 5;
    const int here = min(32, n - (warp << 5));  // threads in this warp
    const unsigned mask = here == 32 ? 0xffffffffu : ((1u << here) - 1u);
    v = kc_warp_reduce<Op>(v, lane, here, mask);
    __syncthreads();  // an earlier call's readers are done with kc_part
    if (lane == 0) kc_part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < warps ? kc_part[lane] : v;
        v = kc_warp_reduce<Op>(v, lane, warps, mask);
        if (lane == 0) kc_part[0] = v;
    }
    __syncthreads();
    return kc_part[0];
}
"""


def helpers_edit(s: Source, fn: Node) -> Edit | None:
    """The edit that puts HELPERS before the function's top-level definition (None when
    the file has them)."""
    if HELPERS_MARK in s.text:
        return None
    top = fn
    while top.parent is not None and top.parent.type != "translation_unit":
        top = top.parent
    at = s.line_start(top)
    return Edit(at, at, HELPERS + "\n")


HALF_BLOCK = re.compile(r"^blockDim\.x(/2|>>1)$")
_TREE_OPS = {"+=": "kc_op_sum"}


def thread_name(s: Source, node: Node) -> bool:
    """`threadIdx.x`, or a local initialized to it and never written."""
    text = s.text_of(node).replace(" ", "")
    if text == "threadIdx.x":
        return True
    if node.type != "identifier":
        return False
    d = lookup(node.text.decode(), node)
    if d is None or d.param or d.init is None:
        return False
    init = re.sub(r"\(\s*(int|unsigned|unsigned int|long long)\s*\)", "",
                  s.text_of(d.init)).replace(" ", "")
    return init == "threadIdx.x"


def tree_step(s: Source, st: Node, var: str) -> tuple[str, str, str] | None:
    """`if (t < s) B[t] op= B[t + s];` -> (B, t text, reducer)."""
    if st.type != "if_statement" or st.child_by_field_name("alternative") is not None:
        return None
    cond = st.child_by_field_name("condition").named_children[0]
    if cond.type != "binary_expression" or cond.child_by_field_name("operator").type != "<":
        return None
    t_node = cond.child_by_field_name("left")
    if s.text_of(cond.child_by_field_name("right")).strip() != var or \
            not thread_name(s, t_node):
        return None
    t = s.text_of(t_node).strip()
    body = st.child_by_field_name("consequence")
    if body.type == "compound_statement":
        inner = [c for c in body.named_children if c.type != "comment"]
        if len(inner) != 1:
            return None
        body = inner[0]
    if body.type != "expression_statement" or not body.named_children:
        return None
    e = body.named_children[0]
    if e.type != "assignment_expression":
        return None
    left, right = e.child_by_field_name("left"), e.child_by_field_name("right")
    op = e.child_by_field_name("operator").type
    if left.type != "subscript_expression":
        return None
    buf = s.text_of(left.child_by_field_name("argument")).strip()
    nospace = lambda n: s.text_of(n).replace(" ", "")
    mine = f"{buf}[{t}]".replace(" ", "")
    other = {f"{buf}[{t}+{var}]".replace(" ", ""), f"{buf}[{var}+{t}]".replace(" ", "")}
    if nospace(left) != mine:
        return None
    if op == "+=" and nospace(right) in other:
        return buf, t, "kc_op_sum"
    if op == "=" and right.type == "binary_expression" and \
            right.child_by_field_name("operator").type == "+":
        a, b = nospace(right.child_by_field_name("left")), nospace(right.child_by_field_name(
            "right"))
        if {a, b} & {mine} and ({a, b} - {mine}) <= other and len({a, b}) == 2:
            return buf, t, "kc_op_sum"
    if op == "=" and right.type == "call_expression":
        fn = s.text_of(right.child_by_field_name("function")).strip()
        args = [nospace(a) for a in right.child_by_field_name("arguments").named_children]
        if len(args) == 2 and mine in args and (set(args) - {mine}) <= other and \
                len(set(args)) == 2:
            if fn in ("fmaxf", "fmax", "max"):
                return buf, t, "kc_op_max"
            if fn in ("fminf", "fmin", "min"):
                return buf, t, "kc_op_min"
    return None




def tree_loop(s: Source, lp: Node) -> tuple[str, str, str] | None:
    """(buffer, thread index text, reducer) of a for statement that is a shared-memory
    tree reduction: `for (s = blockDim.x/2; s > 0; s >>= 1) { if (t < s) B[t] op= B[t+s];
    __syncthreads(); }` (sum, fmaxf/fminf); None otherwise."""
    init, cond = lp.child_by_field_name("initializer"), lp.child_by_field_name("condition")
    upd, body = lp.child_by_field_name("update"), lp.child_by_field_name("body")
    if init is None or init.type != "declaration" or cond is None or upd is None:
        return None
    ds = list(declarators(init))
    if len(ds) != 1 or ds[0][1] is None or not HALF_BLOCK.match(
            s.text_of(ds[0][1]).replace(" ", "")):
        return None
    var = ds[0][0]
    if s.text_of(cond).replace(" ", "") not in (f"{var}>0", f"{var}>=1", f"0<{var}"):
        return None
    if s.text_of(upd).replace(" ", "") not in (f"{var}>>=1", f"{var}/=2", f"{var}={var}/2",
                                                f"{var}={var}>>1"):
        return None
    stmts = [c for c in body.named_children if c.type != "comment"] \
        if body.type == "compound_statement" else [body]
    if len(stmts) != 2 or s.text_of(stmts[1]).replace(" ", "") != "__syncthreads();":
        return None
    return tree_step(s, stmts[0], var)


ONLINE_MARK = "kc_block_online_softmax"
ONLINE_HELPERS = r"""// kernelcrew: a row's softmax statistics combined over the block: each thread holds
// (m, s), the largest value it saw and the sum of exp(x - m) over its values; two pairs
// merge as (max, s1 e^(m1 - max) + s2 e^(m2 - max)), an empty pair (m = -inf, s = 0)
// changing nothing. Warp shuffles, then one shared-memory stage; every thread gets the
// row's pair. Every thread of the block must call it (it synchronizes).
__device__ __forceinline__ float kc_exp(float v) { return expf(v); }
__device__ __forceinline__ double kc_exp(double v) { return exp(v); }

template <class M, class S>
__device__ __forceinline__ void kc_online_merge(M& m, S& s, M m2, S s2) {
    const M mm = m > m2 ? m : m2;
    if (mm == -(M)INFINITY) return;  // both empty
    s = (m == mm ? s : s * (S)kc_exp(m - mm)) + (m2 == mm ? s2 : s2 * (S)kc_exp(m2 - mm));
    m = mm;
}

template <class M, class S>
__device__ __forceinline__ void kc_warp_online(M& m, S& s, int lane, int count, unsigned mask) {
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const M m2 = __shfl_down_sync(mask, m, o);
        const S s2 = __shfl_down_sync(mask, s, o);
        if (lane + o < count) kc_online_merge(m, s, m2, s2);
    }
}

template <class M, class S>
__device__ __forceinline__ void kc_block_online_softmax(M& m, S& s) {
    __shared__ M kc_pm[32];
    __shared__ S kc_ps[32];
    const int n = blockDim.x * blockDim.y * blockDim.z;
    const int t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    const int lane = t & 31, warp = t >> 5, warps = (n + 31) >> 5;
    const int here = min(32, n - (warp << 5));  // threads in this warp
    const unsigned mask = here == 32 ? 0xffffffffu : ((1u << here) - 1u);
    kc_warp_online(m, s, lane, here, mask);
    __syncthreads();  // an earlier call's readers are done with kc_pm, kc_ps
    if (lane == 0) { kc_pm[warp] = m; kc_ps[warp] = s; }
    __syncthreads();
    if (warp == 0) {
        m = lane < warps ? kc_pm[lane] : -(M)INFINITY;
        s = lane < warps ? kc_ps[lane] : (S)0;
        kc_warp_online(m, s, lane, warps, mask);
        if (lane == 0) { kc_pm[0] = m; kc_ps[0] = s; }
    }
    __syncthreads();
    m = kc_pm[0];
    s = kc_ps[0];
}
"""


def online_helpers_edit(s: Source, fn: Node) -> Edit | None:
    """The edit that puts ONLINE_HELPERS before the function (None when the file has
    them)."""
    if ONLINE_MARK in s.text and "kc_online_merge" in s.text:
        return None
    top = fn
    while top.parent is not None and top.parent.type != "translation_unit":
        top = top.parent
    at = s.line_start(top)
    return Edit(at, at, ONLINE_HELPERS + "\n")
