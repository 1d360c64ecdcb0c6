"""Generating: the runner, the run store and cache, prompt rendering, the embedded model and quantized variants, planted degraders."""
