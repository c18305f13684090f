"""C text the benchmarks' generated harnesses share."""

# now(): wall-clock seconds (CLOCK_MONOTONIC), for timing one call.
NOW = r"""
static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
"""

# __truncsfbf2: float -> bf16, rounding to nearest even (NaNs kept quiet), for builds whose
# compiler calls the runtime's (Debian's libgcc has none): the loop's conversions and the
# rewrite's alike, in a harness whose C holds bf16.
TRUNC_BF16 = r"""
__bf16 __truncsfbf2(float f)
{
    unsigned u;
    unsigned short h;
    __bf16 r;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        h = (unsigned short)((u >> 16) | 0x40);
    else
        h = (unsigned short)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
    memcpy(&r, &h, 2);
    return r;
}
"""
