"""The tiny pretraining settings the pretraining tests share (a 2-layer, H=32 model that trains in
seconds); each test adds its own learning rate, steps and data."""

TINY_MODEL_RUN = dict(
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=64,
    max_position_embeddings=128,
    logging_steps=1,
    eval_steps=0,
    max_eval_samples=16,
    per_device_eval_batch_size=8,
    disable_tqdm=True,
    save_steps=0,
    peak_flops=1e9,
)
