"""Model adapters behind one small interface: an OpenAI-compatible endpoint, or a scripted model."""

from agents_app.models_adapters.base import (
    ModelAdapter,
    ModelToolCall,
    ModelTurn,
    PartialSink,
    RefusedTurn,
    adapter_for,
)

__all__ = ["ModelAdapter", "ModelToolCall", "ModelTurn", "PartialSink", "RefusedTurn", "adapter_for"]
