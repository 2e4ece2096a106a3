"""CoNLL-2003 NER on ``transformers.Trainer`` (paper section 5.3), in the shape of transformers'
``run_ner.py``.

* :mod:`.data`: CoNLL / JSON readers, tag schemes -> a ``datasets.Dataset`` of documents;
* :mod:`.features`: windows (first-piece labels, ``label_all_pieces``, document context, long
  sentences) as a batched ``datasets.map`` function (cached on disk), and the way back to words;
* :mod:`.metrics`: conlleval, digit for digit;
* :mod:`.tagger`: the feature-based BiLSTM tagger (frozen encoder, Table 7);
* :mod:`.trainer`: ``NerTrainer`` (evaluate = word-level conlleval + prediction files);
* :mod:`.recipe`: the task on the shared runner (:mod:`recipes.runner`), behind
  ``scripts/run_ner.py``.
"""
