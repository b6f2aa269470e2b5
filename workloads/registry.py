"""Model registry: one definition per network per framework, looked up by name.

Framework modules are imported lazily, so looking up a PyTorch model never imports TensorFlow.
"""

import importlib

# framework name -> module that registers its models (and holds its trainer)
FRAMEWORK_MODULES = {
    "torch": "workloads.torch_models",
    "tensorflow": "workloads.tf_models",
    "mxnet": "workloads.mx_models",
}
MODELS = ("alexnet", "googlenet", "resnet50", "tinynet")

_REGISTRY = {}


def register(framework, name):
    def decorate(fn):
        _REGISTRY[(framework, name)] = fn
        return fn

    return decorate


def build_model(framework, name, classes, image_size=224):
    """The network `name` in `framework` (TensorFlow builds for a fixed input size)."""
    if framework not in FRAMEWORK_MODULES:
        raise KeyError(f"unknown framework {framework!r}; known: {', '.join(FRAMEWORK_MODULES)}")
    importlib.import_module(FRAMEWORK_MODULES[framework])
    known = sorted(n for f, n in _REGISTRY if f == framework)
    if (framework, name) not in _REGISTRY:
        raise KeyError(f"unknown model {name!r} for {framework}; known: {', '.join(known)}")
    return _REGISTRY[(framework, name)](classes=classes, image_size=image_size)
