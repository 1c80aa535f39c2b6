/* kernelcrew
entry: ddot
flags: [-O2]
*/
// Double-precision dot product in the style of the reference BLAS: the main loop
// unrolled by 5 into one running sum, a clean-up loop first for the n % 5 left over.
#include <stdint.h>

extern "C" void ddot(const double* dx, const double* dy, double* r, int64_t n_) {
    int n = (int)n_;
    double dtemp = 0.0;
    int m = n % 5;
    int i;
    for (i = 0; i < m; i++) {
        dtemp = dtemp + dx[i] * dy[i];
    }
    for (i = m; i < n; i += 5) {
        dtemp = dtemp + dx[i] * dy[i] + dx[i + 1] * dy[i + 1] + dx[i + 2] * dy[i + 2] +
                dx[i + 3] * dy[i + 3] + dx[i + 4] * dy[i + 4];
    }
    r[0] = dtemp;
}
