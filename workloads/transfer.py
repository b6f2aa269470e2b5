"""Copy a PyTorch model's weights into the TensorFlow and MXNet definitions of the same network.

Used to prove the three definitions are the same network (same input, same weights -> same
logits). Layers are matched in PyTorch's definition order: convolutions, dense layers and batch
norms (with their running statistics). Layout differences are handled here: TensorFlow's
convolution kernels are HWIO (PyTorch: OIHW) and its dense kernels are (in, out) (PyTorch:
(out, in)); MXNet uses PyTorch's layouts. A mismatch in kind or shape is an error naming the layer.
"""

import numpy as np


def torch_layers(model):
    """[(kind, name, [numpy arrays])] of every weight-bearing layer, in definition order."""
    from torch import nn

    out = []
    for name, m in model.named_modules():
        if isinstance(m, nn.Conv2d):
            out.append(("conv", name, [m.weight] + ([m.bias] if m.bias is not None else [])))
        elif isinstance(m, nn.Linear):
            out.append(("dense", name, [m.weight, m.bias]))
        elif isinstance(m, nn.BatchNorm2d):
            out.append(("bn", name, [m.weight, m.bias, m.running_mean, m.running_var]))
    return [(kind, name, [t.detach().cpu().numpy() for t in ts]) for kind, name, ts in out]


def _tf_kind(layer):
    return {"Conv2D": "conv", "Dense": "dense", "BatchNormalization": "bn"}[type(layer).__name__]


def to_tensorflow(tf_model, source):
    """Load `torch_layers(...)` output into a model built by workloads.tf_models."""
    targets = tf_model.weight_layers
    if len(targets) != len(source):
        raise ValueError(f"TensorFlow model has {len(targets)} weight layers, PyTorch {len(source)}")
    for layer, (kind, name, arrays) in zip(targets, source):
        if _tf_kind(layer) != kind:
            raise ValueError(f"layer {name}: PyTorch {kind} meets TensorFlow {layer.name}")
        if kind == "conv":
            arrays = [arrays[0].transpose(2, 3, 1, 0)] + arrays[1:]
        elif kind == "dense":
            arrays = [arrays[0].T] + arrays[1:]
        want = [tuple(w.shape) for w in layer.get_weights()]
        if want != [a.shape for a in arrays]:
            raise ValueError(f"layer {name}: shapes {[a.shape for a in arrays]} do not fit {layer.name} {want}")
        layer.set_weights([np.ascontiguousarray(a) for a in arrays])


def to_mxnet(net, source):
    """Load `torch_layers(...)` output into an initialized net built by workloads.mx_models."""
    import mxnet as mx

    params = list(net.collect_params().values())
    arrays = [(name, a) for _, name, arrs in source for a in arrs]
    if len(params) != len(arrays):
        raise ValueError(f"MXNet model has {len(params)} parameter arrays, PyTorch {len(arrays)}")
    for param, (name, a) in zip(params, arrays):
        if tuple(param.shape) != a.shape:
            raise ValueError(f"layer {name}: shape {a.shape} does not fit {param.name} {param.shape}")
        param.set_data(mx.nd.array(a, dtype=a.dtype))
