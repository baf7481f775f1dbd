"""probe for PyTorch: the PyTorch collector and PrecisionDebugger."""
