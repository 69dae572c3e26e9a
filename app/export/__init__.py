"""Export and interop: a PyTorch training script, ONNX, .safetensors weights, and import from PyTorch."""
from .graph import ExportError, plan_export
from .onnx_export import export_onnx
from .pytorch import export_pytorch, generate_script
from .weights import load_into_engine, load_weights, read_state_dict, save_weights

__all__ = ["ExportError", "export_onnx", "export_pytorch", "generate_script", "load_into_engine",
           "load_weights", "plan_export", "read_state_dict", "save_weights"]
