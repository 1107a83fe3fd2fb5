"""Build helpers of the attend package (used by setup.py only; not installed): where the C
sources are, how libattend.so is linked for a wheel, and how its dependencies are bundled."""
