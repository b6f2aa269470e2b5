import pytest
import torch

from dlscale.workloads.registry import MODELS, build_model

# torchvision's figures at 1000 classes (see ../shared/STACK.md).
REFERENCE = {"alexnet": 61_100_840, "googlenet": 6_624_904, "resnet50": 25_557_032}


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_parameter_counts_match_reference(name):
    model = build_model("torch", name, 1000)
    assert sum(p.numel() for p in model.parameters()) == REFERENCE[name]


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("size", [64, 96])
def test_models_run_at_small_inputs(name, size):
    model = build_model("torch", name, 10).eval()
    with torch.no_grad():
        assert model(torch.zeros(2, 3, size, size)).shape == (2, 10)


def test_unknown_names_list_the_known_ones():
    with pytest.raises(KeyError, match="unknown model 'vgg' for torch; known: alexnet, googlenet, resnet50"):
        build_model("torch", "vgg", 10)
    with pytest.raises(KeyError, match="unknown framework 'caffe'; known: torch"):
        build_model("caffe", "alexnet", 10)
