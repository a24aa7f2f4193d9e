"""Real library models with random weights (nothing downloaded), for the tests that run where the libraries
import: torchao 0.18 in the dev set-up and the compat venv, torchvision 0.29.1 in the compat venv on torch
2.14.1 only (PyPI's torchvision does not import beside the dev set-up's CPU torch 2.13). Each library is
imported by the builder that needs it."""

import torch
from torch import nn

from ctc_doctor import Workload


def detector():
    """A Faster R-CNN (MobileNetV3 backbone, 320 px) on one 160 x 160 image, in eval mode: its RoI pooler sets
    its scales lazily on the first call, and the number of boxes it keeps is made from the data."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.detection.fasterrcnn_mobilenet_v3_large_320_fpn(weights=None, weights_backbone=None, num_classes=5)
    return model.eval(), ([torch.rand(3, 160, 160)],)


def _quantize_before_call_2(model, index):
    from torchao.quantization import Int8WeightOnlyConfig, quantize_

    # in place, after the first compile: the weights become Int8Tensor (once: every pass of the doctor's
    # over this model calls the hook, and torchao cannot quantize a quantized weight again)
    if index == 2 and isinstance(model[0].weight, nn.Parameter) and type(model[0].weight.data) is torch.Tensor:
        quantize_(model, Int8WeightOnlyConfig())


def quantized_after_compile():
    """An MLP quantized in place with torchao between calls 1 and 2, after the first compile."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64))
    x = torch.randn(8, 64)
    return Workload(model, (x,), variants=[(x,)] * 3, before_call=_quantize_before_call_2)


def yolo():
    """Ultralytics' YOLOv8n built from its packaged yaml (random weights), in eval mode, on a 64 x 64 image."""
    from ultralytics.nn.tasks import DetectionModel

    torch.manual_seed(0)
    return DetectionModel("yolov8n.yaml", verbose=False).eval(), (torch.rand(1, 3, 64, 64),)
