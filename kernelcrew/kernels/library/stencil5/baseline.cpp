/* kernelcrew
entry: stencil5
flags: [-O2]
*/
// A 5-point Jacobi step as ported from column-major code: an indexing macro, the
// column loop outside and the row loop inside (stride nx), `int` counters, the
// border copied in separate loops.
#include <stdint.h>

#define U(i, j) u[(i) * nx + (j)]
#define V(i, j) v[(i) * nx + (j)]

extern "C" void stencil5(const float* u, float* v, float c0, float c1, int64_t ny_,
                         int64_t nx_) {
    int ny = (int)ny_, nx = (int)nx_;
    for (int j = 0; j < nx; j++) {
        V(0, j) = U(0, j);
        V(ny - 1, j) = U(ny - 1, j);
    }
    for (int i = 0; i < ny; i++) {
        V(i, 0) = U(i, 0);
        V(i, nx - 1) = U(i, nx - 1);
    }
    for (int j = 1; j < nx - 1; j++) {
        for (int i = 1; i < ny - 1; i++) {
            V(i, j) = c0 * U(i, j) + c1 * (U(i - 1, j) + U(i + 1, j) + U(i, j - 1) + U(i, j + 1));
        }
    }
}
