"""Real library models the project had not met before issue 62 (random weights, nothing downloaded), one per
library, each with the pattern it really has; `tests/test_libraries.py` runs them where the libraries import
(the compat venv: `make compat`). Each library is imported by the builder that needs it. The zoo's
`fixtures/ecosystem.py` mirrors each pattern for the fast tier.

- torch_geometric: a GraphSAGE classifier pooled with `global_mean_pool(x, batch)` (size left out), mini-batches of
  graphs of other node counts;
- kornia: an augmentation stage (flip, color jitter, crop) compiled with the CNN after it;
- monai: a 3-d UNet through `sliding_window_inference`, the routine compiled whole;
- torchdiffeq: a neural ODE, `odeint` (adaptive dopri5) compiled whole with its dynamics;
- gpytorch: a deep-kernel GP (a feature extractor, then an exact GP on its features), its posterior compiled whole;
- nnAudio: a mel-spectrogram keyword classifier over a DataLoader whose last batch is partial.
"""

import torch
from torch import nn

from ctc_doctor import Workload
from ctc_doctor.fixtures.ecosystem import graph_batch

# --- torch_geometric ----------------------------------------------------------------------------------


class GraphSage(nn.Module):
    def __init__(self, features=16, hidden=32, classes=3):
        super().__init__()
        from torch_geometric.nn import SAGEConv

        self.conv1 = SAGEConv(features, hidden)
        self.conv2 = SAGEConv(hidden, hidden)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x, edge_index, batch):
        from torch_geometric.nn import global_mean_pool

        x = self.conv1(x, edge_index).relu()
        x = self.conv2(x, edge_index).relu()
        x = global_mean_pool(x, batch)  # POOL
        return self.head(x)


def _graphs(nodes, features=16, seed=0):
    return graph_batch(nodes, features, seed)  # the zoo's mirror makes its mini-batches the same way


def graph_pooling():
    """Four graphs per mini-batch, another node count in each batch."""
    torch.manual_seed(0)
    batches = [_graphs(n, seed=i) for i, n in enumerate(([10, 11, 12, 13], [12, 13, 11, 10], [14, 12, 13, 11], [11, 10, 10, 12]))]
    return Workload(GraphSage().eval(), batches[0], variants=batches[1:])


# --- kornia -------------------------------------------------------------------------------------------


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1)
        )
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


class AugmentedClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        import kornia.augmentation as K

        self.augment = nn.Sequential(K.RandomHorizontalFlip(), K.ColorJitter(0.2, 0.2, 0.2, 0.1, p=0.8), K.RandomResizedCrop((32, 32)))
        self.net = _Net()

    def forward(self, images):
        return self.net(self.augment(images))


def augmentation():
    """Batches of 8 images through kornia's augmentations, then a small CNN, compiled as one module."""
    torch.manual_seed(0)
    images = [torch.rand(8, 3, 40, 40) for _ in range(3)]
    return Workload(AugmentedClassifier(), (images[0],), variants=[(x,) for x in images[1:]])


# --- monai --------------------------------------------------------------------------------------------


class SlidingWindowSegmenter(nn.Module):
    def __init__(self):
        super().__init__()
        from monai.networks.nets import UNet

        self.net = UNet(spatial_dims=3, in_channels=1, out_channels=2, channels=(8, 16, 32), strides=(2, 2), num_res_units=1)

    def forward(self, volume):
        from monai.inferers import sliding_window_inference

        return sliding_window_inference(volume, roi_size=(32, 32, 32), sw_batch_size=2, predictor=self.net, overlap=0.25)


def sliding_window():
    """Volumes of 48 x 48 x 40, then 56 x 48 x 40, through windows of 32^3."""
    torch.manual_seed(0)
    volumes = [torch.rand(1, 1, 48, 48, 40), torch.rand(1, 1, 48, 48, 40), torch.rand(1, 1, 56, 48, 40)]
    return Workload(SlidingWindowSegmenter().eval(), (volumes[0],), variants=[(v,) for v in volumes[1:]])


# --- torchdiffeq --------------------------------------------------------------------------------------


class Dynamics(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 64), nn.Tanh(), nn.Linear(64, 4))

    def forward(self, t, y):
        return self.net(y)


class NeuralODE(nn.Module):
    def __init__(self):
        super().__init__()
        self.func = Dynamics()

    def forward(self, y0, t):
        from torchdiffeq import odeint

        return odeint(self.func, y0, t, method="dopri5", rtol=1e-4, atol=1e-5)


def neural_ode():
    """A batch of 16 states integrated over 5 time points, three calls."""
    torch.manual_seed(0)
    t = torch.linspace(0, 1, 5)
    return Workload(NeuralODE().eval(), (torch.randn(16, 4), t), variants=[(torch.randn(16, 4), t), (torch.randn(16, 4), t)])


# --- gpytorch -----------------------------------------------------------------------------------------


def _deep_kernel_gp():
    import gpytorch

    class FeatureExtractor(nn.Sequential):
        def __init__(self):
            super().__init__(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 2))

    class ExactGP(gpytorch.models.ExactGP):
        def __init__(self, x, y, likelihood):
            super().__init__(x, y, likelihood)
            self.mean_module = gpytorch.means.ConstantMean()
            self.covar_module = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel())

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))

    class DeepKernelRegressor(nn.Module):
        """gpytorch's deep kernel learning example: a neural feature extractor, an exact GP on its features."""

        def __init__(self):
            super().__init__()
            g = torch.Generator().manual_seed(0)
            x = torch.randn(64, 8, generator=g)
            y = x[:, 0].sin() + 0.1 * torch.randn(64, generator=g)
            self.features = FeatureExtractor()
            self.likelihood = gpytorch.likelihoods.GaussianLikelihood()
            self.gp = ExactGP(self.features(x).detach(), y, self.likelihood)
            self.gp.eval()
            self.likelihood.eval()

        def forward(self, x):
            posterior = self.likelihood(self.gp(self.features(x)))
            return posterior.mean, posterior.variance

    return DeepKernelRegressor().eval()


def deep_kernel_gp():
    """The posterior mean and variance at 16 new points, three calls."""
    torch.manual_seed(0)
    return Workload(_deep_kernel_gp(), (torch.randn(16, 8),), variants=[(torch.randn(16, 8),), (torch.randn(16, 8),)])


# --- nnAudio ------------------------------------------------------------------------------------------


class KeywordNet(nn.Module):
    def __init__(self):
        super().__init__()
        from nnAudio.features import MelSpectrogram

        self.frontend = MelSpectrogram(sr=16000, n_fft=400, hop_length=160, n_mels=32, verbose=False)
        self.net = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 12))

    def forward(self, wave):
        return self.net(torch.log1p(self.frontend(wave)).unsqueeze(1))


def keyword_spotting():
    """One-second clips from a DataLoader of batch size 8 over 29 clips: 8, 8, 8, then the last 5."""
    torch.manual_seed(0)
    clips = torch.randn(29, 16000)
    batches = [(b,) for b in torch.utils.data.DataLoader(clips, batch_size=8)]
    return Workload(KeywordNet().eval(), batches[0], variants=batches[1:])


# --- a crash while Dynamo builds a guard ----------------------------------------------------------------


class Irrep(tuple):
    """As e3nn's `o3.Irrep`: a (degree, parity) pair whose `len()` is refused on purpose."""

    def __len__(self):
        raise NotImplementedError  # BREAK:GUARD_LEN


class IrrepDropout(nn.Module):
    """Drops whole irreps, as e3nn's `nn.Dropout` does in training, walking its irreps in forward."""

    def __init__(self, irreps, p=0.1):
        super().__init__()
        self.irreps, self.p = irreps, p

    def forward(self, x):
        chunks, start = [], 0
        for mul, (degree, _parity) in self.irreps:
            width = mul * (2 * degree + 1)
            keep = (torch.rand(x.shape[0], mul, 1) > self.p).to(x.dtype) / (1 - self.p)
            chunks.append((x[:, start : start + width].view(x.shape[0], mul, -1) * keep).flatten(1))
            start += width
        return torch.cat(chunks, 1)


class EquivariantBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(10, 10)
        self.dropout = IrrepDropout(((4, Irrep((0, 1))), (2, Irrep((1, -1)))))

    def forward(self, x):
        return self.dropout(self.lin(x))


def guard_len_crash():
    """A Linear, then a dropout over irreps whose `__len__` raises (e3nn's pattern), in training mode: Dynamo traces
    it, then crashes building the SEQUENCE_LENGTH guard on an irrep (torch 2.13)."""
    torch.manual_seed(0)
    return EquivariantBlock().train(), (torch.randn(5, 10),)


def e3nn_dropout():
    """e3nn's own `nn.Dropout` after a Linear, in training mode: its `Irrep.__len__` raises NotImplementedError."""
    from e3nn import nn as enn

    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(10, 10), enn.Dropout("4x0e + 2x1o", p=0.1)).train(), (torch.randn(5, 10),)
