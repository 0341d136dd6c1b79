"""vLLM log parsing, diagnosis and calibration."""
