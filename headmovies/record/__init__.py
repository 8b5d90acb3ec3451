"""Record any model: a user's own PyTorch training loop streams its heads into a run file that
every `headmovies` renderer reads (docs/recording.md). The constructor is one:
`headmovies.Recorder(path, model, ...)` (also `headmovies.record.Recorder`).

    recorder.py   `Recorder`: open, `step` each epoch, `close`
    schedules.py  when it writes a snapshot: the default schedule, `total=`, or yours
    inputs.py     what it is given, checked: metric values and names, epochs, the group order,
                  and the model staying the one the file holds
    adapters.py   every attention layer's per-head weights of a TransformerLens, nanoGPT,
                  torch.nn.MultiheadAttention or GPT-2 model, or of a weights function

Built on `headmovies.train.recording.Recording`, which the built-in trainers use too.
"""

from headmovies.record.adapters import Adapter, find_adapter
from headmovies.record.recorder import Recorder
from headmovies.record.schedules import default_schedule

__all__ = ["Adapter", "Recorder", "default_schedule", "find_adapter"]
