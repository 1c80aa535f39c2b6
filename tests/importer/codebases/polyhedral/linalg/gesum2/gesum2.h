#ifndef GESUM2_H
#define GESUM2_H

#if !defined(SMALL_SET) && !defined(MEDIUM_SET)
# define MEDIUM_SET
#endif

#ifdef SMALL_SET
# define N 90
#else
# define N 500
#endif

#define _PS_N PS_BOUND(N, n)

#ifdef TYPE_IS_FLOAT
# define DATA_TYPE float
# define SCALAR(x) x##f
#else
# define DATA_TYPE double
# define SCALAR(x) x
#endif

#endif
