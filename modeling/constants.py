"""Constants shared by the library, the recipes and the scripts (each defined once, here)."""

# Label value ignored by the losses (torch.nn.CrossEntropyLoss's default ignore_index), used for
# unmasked MLM positions, padding and non-first word pieces alike.
IGNORE_INDEX = -100

# Written into config.json of folders saved with remote code (``save_pretrained(...,
# remote_code=True)`` or ``modeling.hub.add_remote_code``): with ``trust_remote_code=True`` the
# Auto classes find our classes in the copied source files, without this package installed.
AUTO_MAP = {
    "AutoConfig": "configuration.BertConfig",
    "AutoModel": "modeling.BertModel",
    "AutoModelForPreTraining": "modeling.BertForPreTraining",
    "AutoModelForMaskedLM": "modeling.BertForMaskedLM",
    "AutoModelForSequenceClassification": "modeling.BertForSequenceClassification",
    "AutoModelForQuestionAnswering": "modeling.BertForQuestionAnswering",
    "AutoModelForMultipleChoice": "modeling.BertForMultipleChoice",
    "AutoModelForTokenClassification": "modeling.BertForTokenClassification",
}
# The source files copied next to the weights for that (they import only torch, transformers
# and each other).
REMOTE_CODE_FILES = ("modeling.py", "configuration.py", "constants.py")
