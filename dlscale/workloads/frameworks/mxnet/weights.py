"""Copy the reference (PyTorch) network's weights into the MXNet one (PyTorch's layouts)."""


def load(net, source):
    """Load the reference network's `layers(...)` into an initialized net built by this package's models.py."""
    import mxnet as mx

    params = list(net.collect_params().values())
    arrays = [(name, a) for _, name, arrs in source for a in arrs]
    if len(params) != len(arrays):
        raise ValueError(f"MXNet model has {len(params)} parameter arrays, PyTorch {len(arrays)}")
    for param, (name, a) in zip(params, arrays):
        if tuple(param.shape) != a.shape:
            raise ValueError(f"layer {name}: shape {a.shape} does not fit {param.name} {param.shape}")
        param.set_data(mx.nd.array(a, dtype=a.dtype))
