"""Constants shared by the library, the recipes and the scripts (each defined once, here)."""

# Label value ignored by the losses (torch.nn.CrossEntropyLoss's default ignore_index), used for
# unmasked MLM positions, padding and non-first word pieces alike.
IGNORE_INDEX = -100
