"""Multiply-adds of one image through a PyTorch network: its convolutions and fully connected
layers, counted by forward hooks (the convention: dlscale/workloads/flops.py)."""

import torch

from dlscale.workloads.registry import build_model


def forward_macs(model, image_size, classes):
    """Multiply-adds of the forward pass of one image_size x image_size image through `model`."""
    net = build_model("torch", model, classes).eval()
    macs = []

    def conv(m, _inputs, out):
        macs.append(out[0].numel() * (m.in_channels // m.groups) * m.kernel_size[0] * m.kernel_size[1])

    def linear(m, _inputs, out):
        macs.append(out[0].numel() * m.in_features)

    hooks = [
        m.register_forward_hook(conv if isinstance(m, torch.nn.Conv2d) else linear)
        for m in net.modules()
        if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))
    ]
    with torch.no_grad():
        net(torch.zeros(1, 3, image_size, image_size))
    for h in hooks:
        h.remove()
    return sum(macs)
