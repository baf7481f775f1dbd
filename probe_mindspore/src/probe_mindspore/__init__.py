"""probe for MindSpore: the MindSpore collector and PrecisionDebugger."""
