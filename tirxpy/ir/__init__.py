"""tirxpy.ir (see DESIGN.md section 1)."""
