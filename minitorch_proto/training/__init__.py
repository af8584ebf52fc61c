"""Training prototype MIL models: one contract, four engines.

=======================  ===============================================================
module                   what it holds
=======================  ===============================================================
``config``               :class:`TrainConfig`: how a model is optimised (all engines)
``sequential``           :func:`train_model`: the step-by-step reference trainer
``setup``                what the batched engines start from and return (:class:`BatchedFit`)
``tensor``               the tensor engine: M models as batched torch operations (CUDA)
``compiled``             the numba engine: each model's epoch as one compiled loop (CPU)
``compiled_distances``   the numba engine's distances and their gradients
``batched``              :func:`train_batched`: M models at once, dispatching to an engine
``distributed``          the streaming engine: one model, bags read from disk in chunks,
                         data-parallel under ``torchrun``
=======================  ===============================================================

The engines: the sequential reference (the semantics), the tensor and the compiled engines
(many models at once, through :func:`train_batched`) and the streaming engine (one model on
collections too large for memory, :func:`~minitorch_proto.training.distributed.train_streaming`).
Each is tested to give the reference trainer's parameters: the batched engines over a seeded
sample of the cross product of the model's and the trainer's options (float64, 1e-9,
``tests/test_training.py``), the streaming engine on one process and on two
(``tests/test_distributed.py``).
"""
from .batched import train_batched
from .config import TrainConfig, compat_train_config, epoch_batches
from .sequential import train_model
from .setup import BatchedFit

__all__ = ["BatchedFit", "TrainConfig", "compat_train_config", "epoch_batches", "train_batched", "train_model"]
