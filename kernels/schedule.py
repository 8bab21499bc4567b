"""Defaults the kernel library shares: the SM count a persistent kernel plans for when no device is given."""

SM_COUNT_H100 = 132
"""SMs of an H100 SXM: the default unit count of the persistent kernels (the torch entry points pass
the device's own count)."""
