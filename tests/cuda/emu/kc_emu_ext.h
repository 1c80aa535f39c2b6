// More of the CUDA model for kc_emu.h: half and bfloat16 numbers, tensor-core fragments
// (nvcuda::wmma) and asynchronous copies into shared memory (the __pipeline primitives),
// each emulated with the ordering the hardware guarantees and no more, so a kernel that
// relies on more fails here as it would on a device:
//
// - __half is IEEE binary16 (g++'s _Float16), __nv_bfloat16 the top 16 bits of a float
//   (rounded to nearest even); arithmetic on two of them rounds to their precision;
// - a wmma fragment holds its whole tile in every lane (the hardware spreads it over
//   the warp in an unspecified layout; code that only fills, loads, multiplies, stores
//   and maps every element the same way cannot tell). load/store/mma are warp-collective:
//   every lane waits for the others first (a lane that skips one deadlocks, as it hangs
//   on a device); tf32 operands are truncated to 10 mantissa bits in mma_sync, as the
//   tensor cores read them;
// - __pipeline_memcpy_async only queues the copy: it happens at the thread's
//   __pipeline_wait_prior that covers its group (a thread that reads shared memory before
//   waiting, or another thread before the barrier after the wait, sees the old contents);
//   copies a thread never waits for are dropped.
#pragma once
#include <type_traits>

struct __half {
    _Float16 v;
    __half() = default;
    __half(float f) : v(static_cast<_Float16>(f)) {}
    __half(double f) : v(static_cast<_Float16>(f)) {}
    __half(int i) : v(static_cast<_Float16>(i)) {}
    operator float() const { return static_cast<float>(v); }
};
static_assert(sizeof(__half) == 2, "__half is 16 bits");

struct __nv_bfloat16 {
    uint16_t bits;
    __nv_bfloat16() = default;
    __nv_bfloat16(float f) {
        uint32_t u;
        std::memcpy(&u, &f, 4);
        if ((u & 0x7fffffffu) > 0x7f800000u) {
            bits = uint16_t((u >> 16) | 0x40u);  // NaN stays NaN
        } else {
            u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
            bits = uint16_t(u >> 16);
        }
    }
    __nv_bfloat16(double f) : __nv_bfloat16(float(f)) {}
    __nv_bfloat16(int i) : __nv_bfloat16(float(i)) {}
    operator float() const {
        uint32_t u = uint32_t(bits) << 16;
        float f;
        std::memcpy(&f, &u, 4);
        return f;
    }
};
static_assert(sizeof(__nv_bfloat16) == 2, "__nv_bfloat16 is 16 bits");

#define KC_EMU_HALF_OPS(T)                                                             \
    inline T operator+(T a, T b) { return T(float(a) + float(b)); }                    \
    inline T operator-(T a, T b) { return T(float(a) - float(b)); }                    \
    inline T operator*(T a, T b) { return T(float(a) * float(b)); }                    \
    inline T operator/(T a, T b) { return T(float(a) / float(b)); }                    \
    inline T& operator+=(T& a, T b) { a = a + b; return a; }                           \
    inline T& operator*=(T& a, T b) { a = a * b; return a; }
KC_EMU_HALF_OPS(__half)
KC_EMU_HALF_OPS(__nv_bfloat16)
#undef KC_EMU_HALF_OPS

struct alignas(4) __half2 { __half x, y; };
struct alignas(4) __nv_bfloat162 { __nv_bfloat16 x, y; };
inline float __half2float(__half h) { return float(h); }
inline __half __float2half(float f) { return __half(f); }
inline __half __float2half_rn(float f) { return __half(f); }
inline float __bfloat162float(__nv_bfloat16 h) { return float(h); }
inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
inline float2 __half22float2(__half2 h) { return {float(h.x), float(h.y)}; }
inline __half2 __floats2half2_rn(float a, float b) { return {__half(a), __half(b)}; }
inline __half2 __float22half2_rn(float2 f) { return {__half(f.x), __half(f.y)}; }
inline float2 __bfloat1622float2(__nv_bfloat162 h) { return {float(h.x), float(h.y)}; }
inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) {
    return {__nv_bfloat16(a), __nv_bfloat16(b)};
}

namespace kc_emu {

// tf32: 10 mantissa bits. Conversion rounds to nearest (ties away from zero), what
// cvt.rna.tf32.f32 does; the tensor cores truncate operands that were not converted.
inline float tf32_round(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & 0xffffe000u;
    std::memcpy(&f, &u, 4);
    return f;
}
inline float tf32_truncate(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7f800000u) != 0x7f800000u) u &= 0xffffe000u;
    std::memcpy(&f, &u, 4);
    return f;
}

inline void warp_collective() { yield_as(AT_WARP, 0xffffffffu); }

// ---- asynchronous copies: a queue of groups per thread
struct Copy {
    void* dst;
    const void* src;
    size_t size, zfill;
};
struct Pipeline {
    std::vector<Copy> open;  // not committed yet
    std::vector<std::vector<Copy>> groups;  // committed, oldest first
};
inline std::vector<Pipeline>& pipelines() { static std::vector<Pipeline> p; return p; }
inline Pipeline& my_pipeline() {
    auto& p = pipelines();
    if (p.size() < size_t(nthreads())) p.resize(size_t(nthreads()));
    return p[size_t(tid())];
}
inline void reset_pipelines() { pipelines().assign(size_t(nthreads()), Pipeline{}); }

}  // namespace kc_emu

inline void __pipeline_memcpy_async(void* dst, const void* src, size_t size, size_t zfill = 0) {
    if (size != 4 && size != 8 && size != 16) {
        std::fprintf(stderr, "kc_emu: __pipeline_memcpy_async of %zu bytes (4, 8 or 16)\n",
                     size);
        std::exit(4);
    }
    if (reinterpret_cast<uintptr_t>(dst) % size || reinterpret_cast<uintptr_t>(src) % size) {
        std::fprintf(stderr, "kc_emu: __pipeline_memcpy_async of %zu bytes not aligned\n", size);
        std::exit(4);
    }
    kc_emu::my_pipeline().open.push_back({dst, src, size, zfill});
}
inline void __pipeline_commit() {
    auto& p = kc_emu::my_pipeline();
    p.groups.push_back(std::move(p.open));
    p.open.clear();
}
inline void __pipeline_wait_prior(size_t prior) {
    auto& p = kc_emu::my_pipeline();
    while (p.groups.size() > prior) {
        for (const auto& c : p.groups.front()) {
            std::memcpy(c.dst, c.src, c.size - c.zfill);
            std::memset(static_cast<char*>(c.dst) + (c.size - c.zfill), 0, c.zfill);
        }
        p.groups.erase(p.groups.begin());
    }
}

// ---- tensor-core fragments
namespace nvcuda {
namespace wmma {
struct row_major {};
struct col_major {};
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
enum layout_t { mem_row_major, mem_col_major };
namespace precision {
struct tf32 {};
}  // namespace precision

template <class T> struct storage_of { using type = T; };
template <> struct storage_of<precision::tf32> { using type = float; };

template <class Use, int M, int N, int K, class T, class Layout = void> struct fragment {
    static constexpr int rows = std::is_same<Use, matrix_b>::value ? K : M;
    static constexpr int cols = std::is_same<Use, matrix_a>::value ? K : N;
    static constexpr int num_elements = rows * cols;
    using element_type = typename storage_of<T>::type;
    static constexpr bool is_tf32 = std::is_same<T, precision::tf32>::value;
    element_type x[rows * cols];
};

inline float __float_to_tf32(float f) { return kc_emu::tf32_round(f); }

template <class Use, int M, int N, int K, class T, class L, class V>
inline void fill_fragment(fragment<Use, M, N, K, T, L>& f, V v) {
    for (auto& e : f.x) e = static_cast<typename fragment<Use, M, N, K, T, L>::element_type>(v);
}

template <class Use, int M, int N, int K, class T, class L, class P>
inline void load_matrix_sync(fragment<Use, M, N, K, T, L>& f, const P* p, unsigned ldm) {
    static_assert(!std::is_same<L, void>::value, "an operand fragment has a layout");
    using F = fragment<Use, M, N, K, T, L>;
    kc_emu::warp_collective();
    for (int r = 0; r < F::rows; ++r)
        for (int c = 0; c < F::cols; ++c)
            f.x[r * F::cols + c] = std::is_same<L, row_major>::value ? p[size_t(r) * ldm + c]
                                                                      : p[size_t(c) * ldm + r];
    kc_emu::warp_collective();
}

template <int M, int N, int K, class T, class P>
inline void load_matrix_sync(fragment<accumulator, M, N, K, T, void>& f, const P* p, unsigned ldm,
                             layout_t layout) {
    kc_emu::warp_collective();
    for (int r = 0; r < M; ++r)
        for (int c = 0; c < N; ++c)
            f.x[r * N + c] = layout == mem_row_major ? p[size_t(r) * ldm + c]
                                                     : p[size_t(c) * ldm + r];
    kc_emu::warp_collective();
}

template <int M, int N, int K, class T, class P>
inline void store_matrix_sync(P* p, const fragment<accumulator, M, N, K, T, void>& f, unsigned ldm,
                              layout_t layout) {
    kc_emu::warp_collective();
    for (int r = 0; r < M; ++r)
        for (int c = 0; c < N; ++c) {
            P v = static_cast<P>(f.x[r * N + c]);
            if (layout == mem_row_major) p[size_t(r) * ldm + c] = v;
            else p[size_t(c) * ldm + r] = v;
        }
    kc_emu::warp_collective();
}

template <int M, int N, int K, class TA, class LA, class TB, class LB, class TC>
inline void mma_sync(fragment<accumulator, M, N, K, TC, void>& d,
                     const fragment<matrix_a, M, N, K, TA, LA>& a,
                     const fragment<matrix_b, M, N, K, TB, LB>& b,
                     const fragment<accumulator, M, N, K, TC, void>& c) {
    kc_emu::warp_collective();
    constexpr bool tf32 = std::is_same<TA, precision::tf32>::value;
    fragment<accumulator, M, N, K, TC, void> out;
    for (int r = 0; r < M; ++r)
        for (int col = 0; col < N; ++col) {
            float acc = float(c.x[r * N + col]);
            for (int k = 0; k < K; ++k) {
                float x = float(a.x[r * K + k]), y = float(b.x[k * N + col]);
                if (tf32) {
                    x = kc_emu::tf32_truncate(x);
                    y = kc_emu::tf32_truncate(y);
                }
                acc += x * y;
            }
            out.x[r * N + col] = static_cast<TC>(acc);
        }
    d = out;
    kc_emu::warp_collective();
}
}  // namespace wmma
}  // namespace nvcuda

inline void kc_emu::block_started() { reset_pipelines(); }

struct alignas(8) uint2 { unsigned x, y; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
