"""The networks in MXNet Gluon (NCHW, as PyTorch), layer for layer the PyTorch definitions; every layer
is given its input size, so parameters exist before the first forward."""

from mxnet.gluon import HybridBlock, nn

from dlscale.workloads.frameworks import GOOGLENET_POOLS, GOOGLENET_STAGES
from dlscale.workloads.registry import register

BN_MOMENTUM = 0.9


def conv(cin, cout, k, s=1, p=0, bias=True):
    return nn.Conv2D(cout, k, strides=s, padding=p, use_bias=bias, in_channels=cin)


def bn(c, eps):
    return nn.BatchNorm(epsilon=eps, momentum=BN_MOMENTUM, in_channels=c)


def seq(*blocks):
    out = nn.HybridSequential()
    out.add(*blocks)
    return out


def basic_conv(cin, cout, k, s=1, p=0):
    return seq(conv(cin, cout, k, s, p, bias=False), bn(cout, 1e-3), nn.Activation("relu"))


class Inception(HybridBlock):
    def __init__(self, cin, widths):
        """An inception module on `cin` channels of `widths` (frameworks.GOOGLENET_STAGES says which)."""
        super().__init__()
        ch1, ch3red, ch3, ch5red, ch5, pool_proj = widths
        self.branch1 = basic_conv(cin, ch1, 1)
        self.branch2 = seq(basic_conv(cin, ch3red, 1), basic_conv(ch3red, ch3, 3, p=1))
        self.branch3 = seq(basic_conv(cin, ch5red, 1), basic_conv(ch5red, ch5, 3, p=1))  # 3x3, as torchvision
        self.branch4 = seq(nn.MaxPool2D(3, 1, 1, ceil_mode=True), basic_conv(cin, pool_proj, 1))

    def hybrid_forward(self, F, x):
        return F.concat(self.branch1(x), self.branch2(x), self.branch3(x), self.branch4(x), dim=1)


class AdaptiveAvgPool(HybridBlock):
    """PyTorch's AdaptiveAvgPool2d(n)."""

    def __init__(self, n):
        super().__init__()
        self.n = n

    def hybrid_forward(self, F, x):
        return F.contrib.AdaptiveAvgPooling2D(x, output_size=self.n)


@register("mxnet", "googlenet")
def googlenet(classes, image_size=None):
    blocks = [
        basic_conv(3, 64, 7, 2, 3),
        nn.MaxPool2D(3, 2, ceil_mode=True),
        basic_conv(64, 64, 1),
        basic_conv(64, 192, 3, p=1),
    ]
    cin = 192
    for pool, stage in zip(GOOGLENET_POOLS, GOOGLENET_STAGES):
        blocks.append(nn.MaxPool2D(pool, 2, ceil_mode=True))
        for widths in stage:
            blocks.append(Inception(cin, widths))
            cin = widths[0] + widths[2] + widths[4] + widths[5]  # its four branches, concatenated
    return seq(*blocks, nn.GlobalAvgPool2D(), nn.Flatten(), nn.Dropout(0.2), nn.Dense(classes, in_units=1024))


@register("mxnet", "alexnet")
def alexnet(classes, image_size=None):
    return seq(
        conv(3, 64, 11, 4, 2),
        nn.Activation("relu"),
        nn.MaxPool2D(3, 2),
        conv(64, 192, 5, p=2),
        nn.Activation("relu"),
        nn.MaxPool2D(3, 2),
        conv(192, 384, 3, p=1),
        nn.Activation("relu"),
        conv(384, 256, 3, p=1),
        nn.Activation("relu"),
        conv(256, 256, 3, p=1),
        nn.Activation("relu"),
        nn.MaxPool2D(3, 2),
        AdaptiveAvgPool(6),
        nn.Flatten(),
        nn.Dropout(0.5),
        nn.Dense(4096, in_units=256 * 6 * 6),
        nn.Activation("relu"),
        nn.Dropout(0.5),
        nn.Dense(4096, in_units=4096),
        nn.Activation("relu"),
        nn.Dense(classes, in_units=4096),
    )


class Bottleneck(HybridBlock):
    """ResNet v1.5 bottleneck: the stride sits on the 3x3 convolution."""

    def __init__(self, cin, planes, stride):
        super().__init__()
        cout = planes * 4
        self.body = seq(
            conv(cin, planes, 1, bias=False),
            bn(planes, 1e-5),
            nn.Activation("relu"),
            conv(planes, planes, 3, stride, 1, bias=False),
            bn(planes, 1e-5),
            nn.Activation("relu"),
            conv(planes, cout, 1, bias=False),
            bn(cout, 1e-5),
        )
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = seq(conv(cin, cout, 1, stride, bias=False), bn(cout, 1e-5))

    def hybrid_forward(self, F, x):
        identity = x if self.downsample is None else self.downsample(x)
        return F.relu(self.body(x) + identity)


@register("mxnet", "resnet50")
def resnet50(classes, image_size=None):
    blocks, cin = [], 64
    for planes, count, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(count):
            blocks.append(Bottleneck(cin, planes, stride if i == 0 else 1))
            cin = planes * 4
    return seq(
        conv(3, 64, 7, 2, 3, bias=False),
        bn(64, 1e-5),
        nn.Activation("relu"),
        nn.MaxPool2D(3, 2, 1),
        *blocks,
        nn.GlobalAvgPool2D(),
        nn.Flatten(),
        nn.Dense(classes, in_units=2048),
    )


@register("mxnet", "tinynet")
def tinynet(classes, image_size=None):
    return seq(
        conv(3, 8, 3, 2, 1),
        nn.Activation("relu"),
        conv(8, 16, 3, 2, 1),
        nn.Activation("relu"),
        AdaptiveAvgPool(4),
        nn.Flatten(),
        nn.Dense(classes, in_units=16 * 16),
    )
