// A small host emulation of the CUDA execution model, for checking the index arithmetic
// of device code on the CPU (no GPU). A kernel file's device code is compiled as host
// C++ after this header; kc_emu::launch runs the launch like the hardware would:
//
// - blocks one after another; the threads of a block as cooperative fibers (ucontext),
//   each with its own stack, so per-thread locals are per thread;
// - __syncthreads() is a block barrier (released when every thread of the block that has
//   not exited waits at it), __shfl_*_sync a warp barrier over the lanes of its mask, so a
//   thread that reads a shared or shuffled value before the others wrote it sees what the
//   hardware would order, not what a sequential loop would (KC_EMU_SCHEDULE=ahead lets one
//   warp run ahead of the others, which shows races between warps);
// - __shared__ variables are function statics: one copy, shared by the threads of the
//   block that is running (blocks never overlap);
// - a state in which no thread can move (a barrier some threads never reach) aborts with
//   "kc_emu: deadlock".
// Only what kernels commonly use is here: dim3, threadIdx/blockIdx/blockDim/gridDim,
// warpSize, float2/float4/double2/int2/int4 and make_*, __ldg, __int_as_float, __syncthreads, __syncwarp,
// __shfl_sync/__shfl_down_sync/__shfl_xor_sync/__shfl_up_sync, atomicAdd/Max, and the
// float math functions (libm's). kc_emu_ext.h adds half/bfloat16 numbers, tensor-core
// fragments (nvcuda::wmma) and asynchronous copies (__pipeline_*).
#pragma once
#include <ucontext.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __restrict__ __restrict
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) alignas(n)

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) float2 { float x, y; };
struct alignas(16) double2 { double x, y; };
struct alignas(16) int4 { int x, y, z, w; };
struct alignas(8) int2 { int x, y; };
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
inline int4 make_int4(int a, int b, int c, int d) { return {a, b, c, d}; }
inline float2 make_float2(float a, float b) { return {a, b}; }
inline double2 make_double2(double a, double b) { return {a, b}; }

static dim3 threadIdx, blockIdx, blockDim, gridDim;
static const int warpSize = 32;

template <class T> inline T __ldg(const T* p) { return *p; }
using std::max;
using std::min;
inline float __fdividef(float a, float b) { return a / b; }
inline float __expf(float a) { return expf(a); }
inline float __logf(float a) { return logf(a); }
inline float rsqrtf(float a) { return 1.0f / sqrtf(a); }
inline float __frcp_rn(float a) { return 1.0f / a; }
inline float __saturatef(float a) { return a < 0.f ? 0.f : a > 1.f ? 1.f : a; }
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
inline int __float_as_int(float f) { int i; std::memcpy(&i, &f, 4); return i; }

namespace kc_emu {

enum State { RUNNABLE, AT_BLOCK, AT_WARP, DONE };

struct Fiber {
    ucontext_t ctx;
    std::vector<char> stack;
    State state = DONE;
    unsigned mask = 0;  // lanes of a warp barrier
};

inline ucontext_t& sched() { static ucontext_t s; return s; }
inline std::vector<Fiber>& fibers() { static std::vector<Fiber> f; return f; }
inline int& current() { static int c = 0; return c; }
inline std::function<void()>& body() { static std::function<void()> b; return b; }
inline std::vector<uint64_t>& slots() { static std::vector<uint64_t> s; return s; }
inline size_t stack_bytes() { return 256 * 1024; }
// `extern __shared__ T name[];` (dynamic shared memory) is rewritten by the test driver to
// `T* name = kc_emu::dynamic_shared<T>();`: the launch's shared_bytes, one per block
inline std::vector<double>& dyn_smem() { static std::vector<double> d; return d; }
template <class T> inline T* dynamic_shared() { return reinterpret_cast<T*>(dyn_smem().data()); }

inline int nthreads() { return int(blockDim.x * blockDim.y * blockDim.z); }
inline int tid() { return current(); }

inline void set_thread_index(int t) {
    threadIdx.x = t % blockDim.x;
    threadIdx.y = (t / blockDim.x) % blockDim.y;
    threadIdx.z = t / (blockDim.x * blockDim.y);
}

inline void yield_as(State s, unsigned mask = 0) {
    Fiber& f = fibers()[current()];
    f.state = s;
    f.mask = mask;
    swapcontext(&f.ctx, &sched());
}

inline void trampoline() {
    body()();
    fibers()[current()].state = DONE;
    // returning ends the fiber: uc_link brings control back to the scheduler
}

// release waiting threads; false when nothing could be released
inline bool release() {
    auto& fs = fibers();
    int n = nthreads();
    bool any = false;
    for (int w = 0; w * 32 < n; ++w) {  // warp barriers: every live lane of the mask waits
        bool waiting = false, all = true;
        for (int l = 0; l < 32 && w * 32 + l < n; ++l) {
            const Fiber& f = fs[w * 32 + l];
            if (f.state == AT_WARP) waiting = true;
        }
        if (!waiting) continue;
        unsigned mask = 0;
        for (int l = 0; l < 32 && w * 32 + l < n; ++l)
            if (fs[w * 32 + l].state == AT_WARP) mask |= fs[w * 32 + l].mask;
        for (int l = 0; l < 32 && w * 32 + l < n; ++l) {
            const Fiber& f = fs[w * 32 + l];
            if ((mask >> l & 1u) && f.state != AT_WARP && f.state != DONE) all = false;
        }
        if (all) {
            for (int l = 0; l < 32 && w * 32 + l < n; ++l)
                if (fs[w * 32 + l].state == AT_WARP) fs[w * 32 + l].state = RUNNABLE;
            any = true;
        }
    }
    if (any) return true;
    bool waiting = false, all = true;
    for (int t = 0; t < n; ++t) {
        if (fs[t].state == AT_BLOCK) waiting = true;
        else if (fs[t].state != DONE) all = false;
    }
    if (waiting && all) {
        for (int t = 0; t < n; ++t)
            if (fs[t].state == AT_BLOCK) fs[t].state = RUNNABLE;
        return true;
    }
    return false;
}

inline void block_started();  // kc_emu_ext.h: per-block state (queued asynchronous copies)

inline void run_block() {
    auto& fs = fibers();
    int n = nthreads();
    block_started();
    for (int t = 0; t < n; ++t) {
        Fiber& f = fs[t];
        if (f.stack.empty()) f.stack.resize(stack_bytes());
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = f.stack.data();
        f.ctx.uc_stack.ss_size = f.stack.size();
        f.ctx.uc_link = &sched();
        makecontext(&f.ctx, trampoline, 0);
        f.state = RUNNABLE;
    }
    // KC_EMU_SCHEDULE=ahead: each round runs only the first warp that can move, so one
    // warp runs as far ahead of the others as the barriers let it (a race on data another
    // warp has not written yet shows); by default every thread that can move runs
    static const bool ahead = std::getenv("KC_EMU_SCHEDULE") &&
                              std::strcmp(std::getenv("KC_EMU_SCHEDULE"), "ahead") == 0;
    for (;;) {
        bool ran = false;
        int first = -1;
        for (int t = 0; t < n && ahead; ++t)
            if (fs[t].state == RUNNABLE) { first = t / 32; break; }
        for (int t = 0; t < n; ++t) {
            if (fs[t].state != RUNNABLE || (first >= 0 && t / 32 != first)) continue;
            current() = t;
            set_thread_index(t);
            swapcontext(&sched(), &fs[t].ctx);
            ran = true;
        }
        bool live = false;
        for (int t = 0; t < n; ++t) live |= fs[t].state != DONE;
        if (!live) return;
        if (!release() && !ran) {
            std::fprintf(stderr, "kc_emu: deadlock in block (%u,%u,%u)\n", blockIdx.x,
                         blockIdx.y, blockIdx.z);
            std::exit(3);
        }
    }
}

// Run `kernel` (a lambda calling the kernel function) over grid x block, like a launch.
inline void launch(dim3 grid, dim3 block, size_t shared_bytes, std::function<void()> kernel) {
    if (grid.x * grid.y * grid.z == 0) return;
    dyn_smem().assign(shared_bytes / sizeof(double) + 1, 0.0);
    gridDim = grid;
    blockDim = block;
    body() = std::move(kernel);
    fibers().resize(std::max<size_t>(fibers().size(), size_t(nthreads())));
    slots().assign(size_t(nthreads()), 0);
    for (unsigned z = 0; z < grid.z; ++z)
        for (unsigned y = 0; y < grid.y; ++y)
            for (unsigned x = 0; x < grid.x; ++x) {
                blockIdx.x = x;
                blockIdx.y = y;
                blockIdx.z = z;
                run_block();
            }
}

template <class T> inline T shuffle(unsigned mask, T v, int src_lane, bool keep_own) {
    static_assert(sizeof(T) <= 8, "kc_emu shuffles 8 bytes at most");
    int t = tid();
    uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof(T));
    slots()[t] = bits;
    yield_as(AT_WARP, mask);  // every lane of the mask has written its slot
    int warp0 = (t / 32) * 32;
    T out = v;
    int src = warp0 + src_lane;
    if (!keep_own && src < nthreads()) std::memcpy(&out, &slots()[src], sizeof(T));
    yield_as(AT_WARP, mask);  // every lane has read before any slot is written again
    return out;
}

}  // namespace kc_emu

inline void __syncthreads() { kc_emu::yield_as(kc_emu::AT_BLOCK); }
inline void __syncwarp(unsigned mask = 0xffffffffu) { kc_emu::yield_as(kc_emu::AT_WARP, mask); }

template <class T> inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
    int lane = kc_emu::tid() % 32;
    int base = lane / width * width;
    return kc_emu::shuffle(mask, v, base + (src % width), false);
}
template <class T> inline T __shfl_down_sync(unsigned mask, T v, unsigned d, int width = 32) {
    int lane = kc_emu::tid() % 32;
    int seg = lane % width;
    bool own = seg + int(d) >= width;
    return kc_emu::shuffle(mask, v, own ? lane : lane + int(d), own);
}
template <class T> inline T __shfl_up_sync(unsigned mask, T v, unsigned d, int width = 32) {
    int lane = kc_emu::tid() % 32;
    int seg = lane % width;
    bool own = seg < int(d);
    return kc_emu::shuffle(mask, v, own ? lane : lane - int(d), own);
}
template <class T> inline T __shfl_xor_sync(unsigned mask, T v, int m, int width = 32) {
    int lane = kc_emu::tid() % 32;
    int src = lane ^ m;
    bool own = src / width != lane / width;
    return kc_emu::shuffle(mask, v, own ? lane : src, own);
}

// fibers do not preempt each other: read-modify-writes are atomic already
template <class T> inline T atomicAdd(T* p, T v) { T o = *p; *p = o + v; return o; }
template <class T> inline T atomicMax(T* p, T v) { T o = *p; *p = o > v ? o : v; return o; }
template <class T> inline T atomicMin(T* p, T v) { T o = *p; *p = o < v ? o : v; return o; }

#include "kc_emu_ext.h"
