"""Where each engine's releases are found and how one is brought here (one module per engine, used by
scripts/engine_releases.py): PyPI archives for vLLM and SGLang, npm and PyPI archives that carry llama.cpp release
tags, a git repository's tags for TGI, copies of TensorRT-LLM's files at known commits."""
