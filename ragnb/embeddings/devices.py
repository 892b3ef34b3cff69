"""Where a local encoder runs and in which precision: the best device present (CUDA, then Apple MPS, else the
CPU) or the one ``RAGNB_EMBEDDING_DEVICE`` names, ``RAGNB_EMBEDDING_DTYPE``, and the batch size that suits the
device. The rules are pure functions of what torch reports (:func:`torch_devices`), so every case can be checked
on any machine; a device that is asked for and not present is an error, never a silent fall-back to the CPU.
"""

from __future__ import annotations

from ragnb.config import EMBEDDING_DEVICE_ENV, EMBEDDING_DTYPE_ENV

CPU_BATCH_SIZE = 32  # texts per forward pass on the CPU (larger batches only pad more)
GPU_BATCH_SIZE = 256  # a GPU is starved below a few hundred short texts per pass


def present_devices(cuda_count: int, mps_available: bool) -> str:
    """What torch sees, as a message shows it: ``cpu, cuda:0, cuda:1`` or ``cpu, mps``."""
    return ", ".join(["cpu", *(f"cuda:{i}" for i in range(cuda_count)), *(["mps"] if mps_available else [])])


def resolve_device(requested: str | None, cuda_count: int, mps_available: bool,
                   source: str = EMBEDDING_DEVICE_ENV) -> str:
    """The device to load a model on: ``requested`` (as :func:`ragnb.config.parse_device` returns it; ``cuda``
    means ``cuda:0``) when present, else a ValueError naming ``source`` and what is present; ``None``: the best
    device present — ``cuda:0``, then ``mps``, else ``cpu``."""
    present = present_devices(cuda_count, mps_available)
    if requested is None:
        return "cuda:0" if cuda_count > 0 else "mps" if mps_available else "cpu"
    if requested == "cpu":
        return "cpu"
    if requested == "mps":
        if not mps_available:
            raise ValueError(f"{source}=mps asks for Apple's Metal GPU, but torch finds none here (present: "
                             f"{present}); unset {source} to use the best device present, or set it to cpu")
        return "mps"
    if not requested.startswith("cuda"):
        raise ValueError(f"{source}={requested!r} is not a device; use cpu, cuda, cuda:N or mps")
    index = int(requested.partition(":")[2] or 0)
    if cuda_count == 0:
        raise ValueError(f"{source}={requested} asks for a CUDA GPU, but torch finds none here (present: {present}); "
                         f"unset {source} to use the best device present, or set it to cpu")
    if index >= cuda_count:
        raise ValueError(f"{source}={requested} asks for CUDA GPU {index}, but torch finds {cuda_count} "
                         f"(present: {present}); name one of them")
    return f"cuda:{index}"


def check_dtype(dtype: str, device: str, source: str = EMBEDDING_DTYPE_ENV) -> str:
    """``dtype`` when ``device`` can compute in it; float16 on the CPU is refused (slow there, and it changes the
    vectors for nothing). bfloat16 runs anywhere torch supports it."""
    if dtype == "float16" and device == "cpu":
        raise ValueError(f"{source}=float16 asks for half precision, but the model runs on the CPU, where float16 "
                         f"is slow and only loses accuracy; unset {source} (float32) on the CPU, or run on a GPU "
                         f"({EMBEDDING_DEVICE_ENV}=cuda or mps)")
    return dtype


def batch_size_for(device: str) -> int:
    """Texts per forward pass when the caller names none: :data:`CPU_BATCH_SIZE` on the CPU, else
    :data:`GPU_BATCH_SIZE`."""
    return CPU_BATCH_SIZE if device == "cpu" else GPU_BATCH_SIZE


def torch_devices() -> tuple[int, bool]:
    """(CUDA GPUs torch can use, whether Apple MPS is available). Imports torch."""
    import torch

    mps = getattr(torch.backends, "mps", None)
    return int(torch.cuda.device_count()), bool(mps is not None and mps.is_available())
