"""Drill-in screens pushed over the panes (Esc returns to where the user was)."""
