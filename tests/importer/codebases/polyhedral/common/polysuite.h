/* polysuite: the shared header of a small suite of loop kernels, written the way
 * polyhedral benchmark suites are: sizes and types chosen with -D switches, arrays
 * declared through macros, loop bounds through macros, and a timer of its own. */
#ifndef POLYSUITE_H
#define POLYSUITE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef PS_PAD
# define PS_PAD 0
#endif

/* -DPS_SCALAR_BOUNDS: loops run to the constant extents instead of the size arguments */
#ifdef PS_SCALAR_BOUNDS
# define PS_BOUND(cst, var) cst
#else
# define PS_BOUND(cst, var) var
#endif

#define PS_1D(name, d1) name[(d1) + PS_PAD]
#define PS_2D(name, d1, d2) name[(d1) + PS_PAD][(d2) + PS_PAD]

#define PS_ALLOC_2D(type, d1, d2) \
  ((type(*)[(d2) + PS_PAD]) calloc(((d1) + PS_PAD) * ((d2) + PS_PAD), sizeof(type)))
#define PS_ALLOC_1D(type, d1) ((type*) calloc((d1) + PS_PAD, sizeof(type)))

/* -DPS_TIME: the program times its kernel and prints the seconds */
#ifdef PS_TIME
static double ps_t0;
static double ps_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}
# define ps_start() (ps_t0 = ps_now())
# define ps_stop() printf("time: %.6f\n", ps_now() - ps_t0)
#else
# define ps_start()
# define ps_stop()
#endif

#endif
