"""Models by framework and name, from its package's models.py once asked for (PyTorch's never import TensorFlow)."""

from dlscale.workloads import frameworks

MODELS = ("alexnet", "googlenet", "resnet50", "tinynet")

_REGISTRY = {}


def register(framework, name):
    def decorate(fn):
        _REGISTRY[(framework, name)] = fn
        return fn

    return decorate


def build_model(framework, name, classes, image_size=224):
    """The network `name` in `framework` (TensorFlow builds for a fixed input size)."""
    frameworks.module(framework, "models")  # registers them
    known = sorted(n for f, n in _REGISTRY if f == framework)
    if (framework, name) not in _REGISTRY:
        raise KeyError(f"unknown model {name!r} for {framework}; known: {', '.join(known)}")
    return _REGISTRY[(framework, name)](classes=classes, image_size=image_size)
