"""Thin adapters between LangChain / LlamaIndex objects and the framework-free engine.

Each adapter module imports its framework lazily, so importing this package costs nothing.
"""
