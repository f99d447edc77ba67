"""Evaluation harness: BEIR loading, sampling, pipelines, metrics and the encoding cache behind ``lmk-rag eval``."""
