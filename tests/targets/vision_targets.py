"""Real torchvision models with random weights (nothing downloaded), for the tests that run where torchvision
imports: the compat venv on torch 2.14.1 has torchvision 0.29.1 (PyPI's torchvision does not import beside
the dev set-up's CPU torch 2.13)."""

import torch
import torchvision


def detector():
    """A Faster R-CNN (MobileNetV3 backbone, 320 px) on one 160 x 160 image, in eval mode: its RoI pooler sets
    its scales lazily on the first call, and the number of boxes it keeps is made from the data."""
    torch.manual_seed(0)
    model = torchvision.models.detection.fasterrcnn_mobilenet_v3_large_320_fpn(weights=None, weights_backbone=None, num_classes=5)
    return model.eval(), ([torch.rand(3, 160, 160)],)
