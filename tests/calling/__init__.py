"""The calling side's tests (``gear.calling``): calls, gathers, casts, deadlines, routing, returns."""
