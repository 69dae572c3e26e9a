"""engine.utils: data loading (engine.utils.data) and gradient checkpointing (engine.utils.checkpoint)."""
