"""The HTTP edge: parse, authenticate, call the in-process transport, render."""
