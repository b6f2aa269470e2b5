"""Copy the reference (PyTorch) network's weights into the JAX one: kernels HWIO and (in, out), batch
norm's statistics in `batch_stats`; a mismatch in kind or shape is an error naming the layer."""

import jax.numpy as jnp
import numpy as np


def _arrays(kind, arrays):
    """The PyTorch arrays as {collection: {flax name: array}} for one layer."""
    if kind == "conv":
        named = {"kernel": arrays[0].transpose(2, 3, 1, 0)} | ({"bias": arrays[1]} if len(arrays) > 1 else {})
        return {"params": named}
    if kind == "dense":
        return {"params": {"kernel": arrays[0].T, "bias": arrays[1]}}
    return {"params": {"scale": arrays[0], "bias": arrays[1]}, "batch_stats": {"mean": arrays[2], "var": arrays[3]}}


def load(model, variables, source):
    """A copy of `model`'s `variables` with the reference network's `layers(...)` in them."""
    targets = model.weight_layers(variables)
    if len(targets) != len(source):
        raise ValueError(f"JAX model has {len(targets)} weight layers, PyTorch {len(source)}")
    out = {c: dict(v) for c, v in variables.items()}
    for (layer, kind_here), (kind, name, arrays) in zip(targets, source):
        if kind_here != kind:
            raise ValueError(f"layer {name}: PyTorch {kind} meets JAX {layer}")
        for collection, named in _arrays(kind, arrays).items():
            have = variables[collection][layer]
            if {k: tuple(v.shape) for k, v in have.items()} != {k: a.shape for k, a in named.items()}:
                shapes = {k: a.shape for k, a in named.items()}
                raise ValueError(f"layer {name}: shapes {shapes} do not fit {layer} {dict(have)}")
            out[collection][layer] = {k: jnp.asarray(np.ascontiguousarray(a)) for k, a in named.items()}
    return out
