"""tirxpy.intrinsics (see DESIGN.md section 1)."""
