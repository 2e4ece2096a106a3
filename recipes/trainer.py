"""``Trainer``: ``transformers.Trainer`` with evaluation and prediction always in dataset order.

transformers 5 applies ``--train_sampling_strategy group_by_length`` to evaluation as well (its
``_get_eval_sampler`` returns a ``LengthGroupedSampler``), so predictions come back shuffled.
Metrics computed from (prediction, label) pairs survive that, but everything that maps
predictions back to examples by position does not: SQuAD's feature -> example post-processing,
NER's window -> word decoding, the GLUE submission files (measured: CoNLL dev F1 3.9 instead
of 64 with grouping on). Length grouping is a training-time choice; evaluation here keeps
transformers' own default order (sequential on one process, its distributed order on many).
Every recipe's trainer derives from this class.
"""

from __future__ import annotations

import transformers
from torch.utils.data import SequentialSampler
from transformers.trainer_utils import has_length


class Trainer(transformers.Trainer):
    def _get_eval_sampler(self, eval_dataset):
        if eval_dataset is None or not has_length(eval_dataset):
            return None
        return SequentialSampler(eval_dataset) if self.args.world_size <= 1 else None
