"""The tirxpy kernel library, written with the public API only."""
