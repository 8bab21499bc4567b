"""tirxpy.lower (see DESIGN.md section 1)."""
