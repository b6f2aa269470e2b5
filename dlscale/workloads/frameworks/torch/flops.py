"""The convolution and fully connected layers of one image's forward pass through a PyTorch network,
found by forward hooks (what dlscale/workloads/flops.py counts)."""

import torch

from dlscale.workloads.registry import build_model


def layers(model, image_size, classes):
    """[(weight elements, output elements, output channels)] of one image_size x image_size image."""
    net = build_model("torch", model, classes).eval()
    found = []

    def hook(m, _inputs, out):
        found.append((m.weight.numel(), out[0].numel(), m.weight.shape[0]))

    hooks = [m.register_forward_hook(hook) for m in net.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
    with torch.no_grad():
        net(torch.zeros(1, 3, image_size, image_size))
    for h in hooks:
        h.remove()
    return found
