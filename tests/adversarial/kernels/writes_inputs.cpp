/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: writes its inputs. The answer is right, but the kernel then zeroes its input
// (casting away const), which would corrupt a caller's data, or make a later call
// cheaper. Defense: inputs live in memory the parent owns, sealed against writing and
// mapped read-only in the worker: the write faults, and the kernel is rejected.
#include <cstdint>

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    for (int64_t i = 0; i < rows; ++i) {
        float acc = 0.0f;
        for (int64_t j = 0; j < cols; ++j) acc += a * x[i * cols + j] + b;
        out[i] = acc;
    }
    float* w = const_cast<float*>(x);
    for (int64_t k = 0; k < rows * cols; ++k) w[k] = 0.0f;
}
