"""ComfyUI nodes running VAEs on vaecodec's engine: link or copy this folder into ComfyUI/custom_nodes/ (the
vaecodec package must be installed in ComfyUI's Python: see the repository's README, "Python")."""

from .nodes import NODE_CLASS_MAPPINGS, NODE_DISPLAY_NAME_MAPPINGS

__all__ = ["NODE_CLASS_MAPPINGS", "NODE_DISPLAY_NAME_MAPPINGS"]
