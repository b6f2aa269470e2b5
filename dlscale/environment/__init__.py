"""The environments: recipe.py says what goes in (hashed into each folder's name), build.py builds and
finds them, probe.py says what a Python has, gpunode.py builds Horovod alone on a GPU node with PyTorch."""
