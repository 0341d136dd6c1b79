"""vramguard: predict, gate, watch and explain vLLM GPU memory.

Importing the package is cheap on purpose: submodules are imported lazily by the CLI.
"""

__version__ = "0.1.0"
