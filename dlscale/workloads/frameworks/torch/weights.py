"""The reference network's weights in definition order and PyTorch's layouts, for the others' `weights.load`."""


def layers(model):
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
