"""tirxpy.primitives (see DESIGN.md section 1)."""
