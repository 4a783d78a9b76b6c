# CUDA module: filled in by the GPU backend work (issue 4). Empty fragment = no CUDA code yet.
