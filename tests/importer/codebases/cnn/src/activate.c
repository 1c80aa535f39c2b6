#include "netlite.h"

/* hard tanh, written with early returns as activation helpers often are */
static inline float hardtan_activate(float x)
{
    if (x < -1) return -1;
    if (x > 1) return 1;
    return x;
}

void activate_hardtan(float *x, const int n)
{
    int i;
    for (i = 0; i < n; ++i) {
        x[i] = hardtan_activate(x[i]);
    }
}
