#ifndef COLSUM_H
#define COLSUM_H

#if !defined(SMALL_SET) && !defined(MEDIUM_SET) && !defined(LARGE_SET)
# define MEDIUM_SET
#endif

#ifdef SMALL_SET
# define N 120
#endif
#ifdef MEDIUM_SET
# define N 1000
#endif
#ifdef LARGE_SET
# define N 2400
#endif

#define _PS_N PS_BOUND(N, n)

#ifdef TYPE_IS_FLOAT
typedef float real_t;
#else
typedef double real_t;
#endif

#endif
