"""SQuAD v1.1 / v2.0 on ``transformers.Trainer``, in the shape of transformers' ``run_qa.py``.

* :mod:`.data`: the official JSON files (schema-checked) -> ``datasets.Dataset`` of questions;
* :mod:`.features`: Google's ``doc_stride`` windows and max-context marks as a batched
  ``datasets.map`` function (cached on disk);
* :mod:`.postprocess`: window logits -> answers, n-best, null odds, tau (``utils_qa``);
* :mod:`.metrics`: the official v1.1 / v2.0 evaluation scripts;
* :mod:`.trainer`: ``QuestionAnsweringTrainer`` (``trainer_qa``);
* :mod:`.pipeline`: ``QuestionAnsweringPipeline`` (any context length, tau from the config);
* :mod:`.recipe`: the task on the shared runner (:mod:`recipes.runner`), behind
  ``scripts/run_squad.py``.

Submodules import ``transformers`` lazily: ``import recipes.squad.data`` is cheap.
"""
