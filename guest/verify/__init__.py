"""Independent verification: hidden tests on a fresh copy of the final workspace."""
