"""Probes: each owns one data source (a BPF program, or /proc) and turns it into records."""
