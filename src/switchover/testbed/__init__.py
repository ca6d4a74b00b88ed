"""The real-engine test bed: vLLM CPU and llama.cpp's llama-server, with real small models, installed
into a cache folder outside the checkout and started on loopback."""
