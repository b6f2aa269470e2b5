"""Copy the reference (PyTorch) network's weights into the TensorFlow one (kernels HWIO and (in, out));
a mismatch in kind or shape is an error naming the layer."""

import numpy as np

_KINDS = {"Conv2D": "conv", "Dense": "dense", "BatchNormalization": "bn"}  # Keras layer class: PyTorch's kind


def load(tf_model, source):
    """Load the reference network's `layers(...)` into a model built by this package's models.py."""
    targets = tf_model.weight_layers
    if len(targets) != len(source):
        raise ValueError(f"TensorFlow model has {len(targets)} weight layers, PyTorch {len(source)}")
    for layer, (kind, name, arrays) in zip(targets, source):
        if _KINDS[type(layer).__name__] != kind:
            raise ValueError(f"layer {name}: PyTorch {kind} meets TensorFlow {layer.name}")
        if kind == "conv":
            arrays = [arrays[0].transpose(2, 3, 1, 0)] + arrays[1:]
        elif kind == "dense":
            arrays = [arrays[0].T] + arrays[1:]
        want = [tuple(w.shape) for w in layer.get_weights()]
        if want != [a.shape for a in arrays]:
            raise ValueError(f"layer {name}: shapes {[a.shape for a in arrays]} do not fit {layer.name} {want}")
        layer.set_weights([np.ascontiguousarray(a) for a in arrays])
