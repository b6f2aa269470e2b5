"""The workload environment builder, apart from the study's runtime (dlscale/runtime/): the pinned
frameworks, Horovod compiled with the harness's source edits, and the record of what was built.
recipe.py says what goes in (its content is hashed into the environment's folder name), build.py
builds and finds it (`python -m dlscale env build`), gpunode.py builds Horovod alone on a GPU node
that has its own PyTorch."""
