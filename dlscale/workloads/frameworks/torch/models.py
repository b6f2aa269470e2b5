"""The networks in PyTorch, as torchvision defines them (no CPU torchvision for torch 2.13): at 1000
classes AlexNet has 61,100,840 parameters, GoogLeNet (no auxiliary heads) 6,624,904, ResNet-50 v1.5
25,557,032. Adaptive pooling lets them run at 64x64 and up; `tinynet` has no batch norm nor dropout."""

import torch
from torch import nn

from dlscale.workloads.frameworks import GOOGLENET_POOLS, GOOGLENET_STAGES
from dlscale.workloads.registry import register


class BasicConv2d(nn.Sequential):
    """Convolution without bias, batch norm (eps 1e-3, as in torchvision's GoogLeNet), ReLU."""

    def __init__(self, cin, cout, **kw):
        super().__init__(nn.Conv2d(cin, cout, bias=False, **kw), nn.BatchNorm2d(cout, eps=0.001), nn.ReLU(inplace=True))


class Inception(nn.Module):
    def __init__(self, cin, widths):
        """An inception module on `cin` channels of `widths` (frameworks.GOOGLENET_STAGES says which)."""
        super().__init__()
        ch1, ch3red, ch3, ch5red, ch5, pool_proj = widths
        self.branch1 = BasicConv2d(cin, ch1, kernel_size=1)
        self.branch2 = nn.Sequential(
            BasicConv2d(cin, ch3red, kernel_size=1), BasicConv2d(ch3red, ch3, kernel_size=3, padding=1)
        )
        # torchvision uses a 3x3 kernel in the "5x5" branch; kept for the reference count.
        self.branch3 = nn.Sequential(
            BasicConv2d(cin, ch5red, kernel_size=1), BasicConv2d(ch5red, ch5, kernel_size=3, padding=1)
        )
        self.branch4 = nn.Sequential(
            nn.MaxPool2d(3, stride=1, padding=1, ceil_mode=True), BasicConv2d(cin, pool_proj, kernel_size=1)
        )

    def forward(self, x):
        return torch.cat([self.branch1(x), self.branch2(x), self.branch3(x), self.branch4(x)], 1)


@register("torch", "googlenet")
def googlenet(classes, image_size=None):
    layers = [
        BasicConv2d(3, 64, kernel_size=7, stride=2, padding=3),
        nn.MaxPool2d(3, stride=2, ceil_mode=True),
        BasicConv2d(64, 64, kernel_size=1),
        BasicConv2d(64, 192, kernel_size=3, padding=1),
    ]
    cin = 192
    for pool, stage in zip(GOOGLENET_POOLS, GOOGLENET_STAGES):
        layers.append(nn.MaxPool2d(pool, stride=2, ceil_mode=True))
        for widths in stage:
            layers.append(Inception(cin, widths))
            cin = widths[0] + widths[2] + widths[4] + widths[5]  # its four branches, concatenated
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.2), nn.Linear(1024, classes))


@register("torch", "alexnet")
def alexnet(classes, image_size=None):
    return nn.Sequential(
        nn.Conv2d(3, 64, kernel_size=11, stride=4, padding=2),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(3, stride=2),
        nn.Conv2d(64, 192, kernel_size=5, padding=2),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(3, stride=2),
        nn.Conv2d(192, 384, kernel_size=3, padding=1),
        nn.ReLU(inplace=True),
        nn.Conv2d(384, 256, kernel_size=3, padding=1),
        nn.ReLU(inplace=True),
        nn.Conv2d(256, 256, kernel_size=3, padding=1),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(3, stride=2),
        nn.AdaptiveAvgPool2d(6),
        nn.Flatten(),
        nn.Dropout(0.5),
        nn.Linear(256 * 6 * 6, 4096),
        nn.ReLU(inplace=True),
        nn.Dropout(0.5),
        nn.Linear(4096, 4096),
        nn.ReLU(inplace=True),
        nn.Linear(4096, classes),
    )


class Bottleneck(nn.Module):
    """ResNet v1.5 bottleneck: the stride sits on the 3x3 convolution."""

    expansion = 4

    def __init__(self, cin, planes, stride):
        super().__init__()
        cout = planes * self.expansion
        self.body = nn.Sequential(
            nn.Conv2d(cin, planes, 1, bias=False),
            nn.BatchNorm2d(planes),
            nn.ReLU(inplace=True),
            nn.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False),
            nn.BatchNorm2d(planes),
            nn.ReLU(inplace=True),
            nn.Conv2d(planes, cout, 1, bias=False),
            nn.BatchNorm2d(cout),
        )
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        return self.relu(self.body(x) + identity)


@register("torch", "resnet50")
def resnet50(classes, image_size=None):
    layers, cin = [], 64
    for planes, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(blocks):
            layers.append(Bottleneck(cin, planes, stride if i == 0 else 1))
            cin = planes * Bottleneck.expansion
    return nn.Sequential(
        nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False),
        nn.BatchNorm2d(64),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(3, stride=2, padding=1),
        *layers,
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(2048, classes),
    )


@register("torch", "tinynet")
def tinynet(classes, image_size=None):
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.Conv2d(8, 16, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(4),
        nn.Flatten(),
        nn.Linear(16 * 16, classes),
    )
