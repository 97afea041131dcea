"""The rules every stand-in tensor follows (the package docstring): its role, its seeded values,
and a digest of a state's values that does not depend on the file format."""
import hashlib
import zlib

import numpy as np

GENERATOR = "theval stand-in weights v1"


def rng(seed: int, name: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(name.encode())])


def normal(seed: int, name: str, shape, std: float) -> np.ndarray:
    values = rng(seed, name).standard_normal(shape, dtype=np.float32)
    values *= np.float32(std)  # in place: a 1-billion-value network is not allocated twice
    return values


def fan_in(shape) -> int:
    return int(np.prod(shape[1:])) if len(shape) > 1 else int(shape[0])


NORMS = ("BatchNorm", "LayerNorm", "GroupNorm", "InstanceNorm", "FrozenBatchNorm")
RESIDUAL_CLOSERS = ("bn3", "downsample.1")


# The rules, by the role a tensor plays (the module docstring): every generator maps its tensors
# to these roles, so the torch checkpoints and the Keras HDF5 file follow one set of rules.
def rule_value(seed: int, name: str, role: str, shape) -> np.ndarray:
    """role: 'zeros', 'ones', 'closer' (the weight of a norm closing a residual branch, 0.2),
    'he' (std sqrt(2 / fan_in)), 'he_closer' (a conv closing a residual branch with no norm
    after it, as pre-activation ResNets have: He x 0.2), 'head' (std 1 / sqrt(fan_in)), 'bare'
    (std 0.02). fan_in is the product of all dimensions but the FIRST (torch's (out, in, kh, kw))."""
    shape = tuple(shape)
    if role == "zeros":
        return np.zeros(shape, np.float32)
    if role == "ones":
        return np.ones(shape, np.float32)
    if role == "closer":
        return np.full(shape, 0.2, np.float32)
    if role in ("he", "he_closer", "head"):
        std = ((1.0 if role == "head" else 2.0) / fan_in(shape)) ** 0.5
        return normal(seed, name, shape, std * (0.2 if role == "he_closer" else 1.0))
    if role == "bare":
        return normal(seed, name, shape, 0.02)
    raise ValueError(role)


def seeded_state(net, seed: int, last_linear: tuple[str, ...] = ()) -> dict:
    """{name: numpy array} for every entry of net.state_dict(), by the rules above.
    last_linear: module names whose weight gets std 1/sqrt(fan_in) (score heads)."""
    import torch

    out = {}
    for mod_name, mod in net.named_modules():
        kind = type(mod).__name__
        for pname, tensor in list(mod._parameters.items()) + list(mod._buffers.items()):
            if tensor is None:
                continue
            name = f"{mod_name}.{pname}" if mod_name else pname
            shape = tuple(tensor.shape)
            if pname in mod._buffers and pname not in ("running_mean", "running_var",
                                                       "num_batches_tracked"):
                if name in net.state_dict():  # persistent: a constant the constructor computed
                    out[name] = tensor.detach().cpu().numpy().copy()
                continue
            if pname == "num_batches_tracked":
                out[name] = np.zeros(shape, np.int64)
                continue
            if pname == "running_mean" or pname == "bias":
                role = "zeros"
            elif pname == "running_var":
                role = "ones"
            elif pname == "weight" and kind.startswith(NORMS):
                role = "closer" if any(mod_name.endswith(c) for c in RESIDUAL_CLOSERS) else "ones"
            elif pname == "weight" and isinstance(mod, (torch.nn.Conv2d, torch.nn.Linear,
                                                        torch.nn.Conv1d, torch.nn.Conv3d)):
                role = "head" if mod_name in last_linear else "he"
            else:  # bare parameters: embeddings, tokens, relative position tables
                role = "bare"
            out[name] = rule_value(seed, name, role, shape)
    missing = set(net.state_dict()) - set(out)
    if missing:
        raise AssertionError(f"stand-in rules left {sorted(missing)[:3]} unfilled")
    return out


def tensors(state: dict) -> dict:
    import torch

    # a copy only where torch needs one (a 3.8 GB network's values are contiguous already);
    # np.require keeps a 0-d array 0-d (BatchNorm's num_batches_tracked)
    return {k: torch.from_numpy(np.require(v, requirements=["C", "W"])) for k, v in state.items()}


def values_digest(state: dict) -> str:
    """sha256 over names, dtypes, shapes and values: equal whatever container wrote them."""
    h = hashlib.sha256()
    for k in sorted(state):
        v = np.array(state[k], order="C")
        h.update(f"{k}|{v.dtype.str}|{v.shape}".encode())
        h.update(v.tobytes())
    return h.hexdigest()
