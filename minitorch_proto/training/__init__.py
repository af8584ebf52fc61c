"""Training prototype MIL models: one contract, four engines.

=================  =====================================================================
module             what it holds
=================  =====================================================================
``config``         :class:`TrainConfig`: how a model is optimised (shared by all engines)
``sequential``     :func:`train_model`: the step-by-step reference trainer (the semantics)
``setup``          what the batched engines start from and return (:class:`BatchedFit`)
``tensor``         the tensor engine: M models as batched torch operations (CUDA, or no numba)
``compiled``       the numba engine: each model's epoch as one compiled loop (CPU default)
``batched``        :func:`train_batched`: M models at once, dispatching to an engine
``distributed``    the streaming engine: bags read lazily, data-parallel under torchrun
``engines``        the one contract: :class:`Problem` in, :class:`Fitted` out, every engine
                   registered by name (:data:`ENGINES`, :func:`fit`)
=================  =====================================================================

A distance registered with :func:`minitorch_proto.distances.register_distance` reaches
every torch engine; ``backend="auto"`` leaves the compiled engine out for distances it has
no kernel for (``tests/test_distance_registry.py``).

Every engine is tested to give the reference trainer's parameters (float64, 1e-9)
over a seeded sample of the cross product of the model's and the trainer's options
(``tests/test_training.py``). One corner is left out: Euclidean distance with a start on
training instances. The start is drawn in float32, so each prototype sits about 1e-8 from its
instance, where the distance's gradient is rounding noise and each engine rounds its own way
(1e-4 to 1e-2 apart after three float64 epochs; in float32, the default, about 4e-6).
"""
from .batched import train_batched
from .config import TrainConfig, compat_train_config, epoch_batches
from .engines import ENGINES, Fitted, Problem, register_engine
from .engines import fit as fit_engine
from .sequential import train_model
from .setup import BatchedFit

__all__ = ["BatchedFit", "TrainConfig", "compat_train_config", "epoch_batches", "train_batched", "train_model",
           "ENGINES", "Fitted", "Problem", "register_engine", "fit_engine"]
