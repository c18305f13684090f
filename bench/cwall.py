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
