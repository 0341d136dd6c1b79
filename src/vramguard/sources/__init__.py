"""Adapters that turn model files (config.json, safetensors, GGUF, HF cache, hub, catalog) into ModelSpec."""
