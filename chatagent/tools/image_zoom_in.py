"""`image_zoom_in_tool` (Qwen-Agent's ImageZoomInToolQwen3VL): crop a region of one of the conversation's images.

    ImageZoomInToolQwen3VL().call({'bbox_2d': [100, 200, 400, 600], 'label': 'cat', 'img_idx': 0}, messages=msgs)
    # -> [ContentItem(image='<work_dir>/<uuid>.png')], the region enlarged for the model to look at

`bbox_2d` is in Qwen3-VL's relative coordinates (0 to 1000 on each side); a region under 32 pixels a side is grown
around its centre, and the crop is resized to multiples of 32 pixels with at least 256 x 32 x 32 of them, as the
model expects. The image is the `img_idx`-th image item of the conversation (a path, file:// or http(s) URL; URLs
are fetched with chatagent's bounded fetcher). Needs Pillow (the `[tools]` extra).
"""

from __future__ import annotations

import io
import math
import os
import uuid
from collections.abc import Sequence
from typing import Any

from chatagent.schema import ContentItem
from chatagent.tools.arguments import JSONObject
from chatagent.tools.base import register_tool
from chatagent.tools.file_access import BaseToolWithFileAccess
from chatagent.tools.web_tools import message_images
from chatagent.utils.extras import missing_dependency
from chatagent.utils.url_fetch import FetchError, fetch

__all__ = ["ImageZoomInToolQwen3VL"]

MAX_IMAGE_BYTES = 50 << 20
FETCH_TIMEOUT = 30.0
MIN_SIDE = 32


@register_tool("image_zoom_in_tool")
class ImageZoomInToolQwen3VL(BaseToolWithFileAccess):
    """Zoom in on a region of an image (a bounding box in 0-1000 coordinates)."""

    description = (
        "Zoom in on a specific region of an image by cropping it based on a bounding box (bbox) and an optional "
        "object label"
    )
    parameters = {
        "type": "object",
        "properties": {
            "bbox_2d": {
                "type": "array",
                "items": {"type": "number"},
                "minItems": 4,
                "maxItems": 4,
                "description": "The region to zoom in, as [x1, y1, x2, y2]: top-left and bottom-right corners",
            },
            "label": {"type": "string", "description": "The name or label of the object in the bounding box"},
            "img_idx": {"type": "number", "description": "The index of the zoomed-in image (starting from 0)"},
        },
        "required": ["bbox_2d", "label", "img_idx"],
    }

    def call(self, params: str | JSONObject, files: Sequence[str] | None = None, **kwargs: Any) -> list[ContentItem]:
        args = self.parse_params(params)
        images = message_images(kwargs.get("messages") or [])
        index = int(args["img_idx"])
        if not 0 <= index < len(images):
            return [ContentItem(text=f"Error: there is no image {index}; the conversation has {len(images)}.")]
        try:
            image = _open(images[index], self.work_dir)
        except (OSError, ValueError) as e:
            return [ContentItem(text=f"Error: Invalid input image: {e}")]
        width, height = image.size
        x1, y1, x2, y2 = (float(v) / 1000.0 for v in args["bbox_2d"])
        left, top, right, bottom = grown_box(x1 * width, y1 * height, x2 * width, y2 * height, width, height)
        if right <= left or bottom <= top:
            return [ContentItem(text="Error: the bounding box holds no part of the image.")]
        crop = image.crop((left, top, right, bottom))
        new_h, new_w = smart_resize(bottom - top, right - left)
        crop = crop.resize((new_w, new_h), resample=_bicubic())
        os.makedirs(self.work_dir, exist_ok=True)
        path = os.path.abspath(os.path.join(self.work_dir, f"{uuid.uuid4()}.png"))
        crop.save(path)
        return [ContentItem(image=path)]


def grown_box(left: float, top: float, right: float, bottom: float, width: int, height: int) -> list[int]:
    """The box inside the image, grown around its centre to 32 pixels a side when smaller (as Qwen-Agent does)."""
    left, top, right, bottom = max(0.0, left), max(0.0, top), min(float(width), right), min(float(height), bottom)
    h, w = bottom - top, right - left
    if 0 < min(h, w) < MIN_SIDE:
        cx, cy, ratio = (left + right) / 2, (top + bottom) / 2, MIN_SIDE / min(h, w)
        half_h, half_w = math.ceil(h * ratio / 2), math.ceil(w * ratio / 2)
        grown = [max(0, math.floor(cx - half_w)), max(0, math.floor(cy - half_h)),
                 min(width, math.ceil(cx + half_w)), min(height, math.ceil(cy + half_h))]  # fmt: skip
        if grown[3] - grown[1] > MIN_SIDE and grown[2] - grown[0] > MIN_SIDE:
            return grown
    return [math.floor(left), math.floor(top), math.ceil(right), math.ceil(bottom)]


def smart_resize(height: int, width: int, factor: int = 32, min_pixels: int = 256 * 32 * 32,
                 max_pixels: int = 12845056) -> tuple[int, int]:  # fmt: skip
    """(height, width) rounded to multiples of `factor`, scaled into [min_pixels, max_pixels]."""
    h = max(factor, round(height / factor) * factor)
    w = max(factor, round(width / factor) * factor)
    if h * w > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h, w = math.floor(height / beta / factor) * factor, math.floor(width / beta / factor) * factor
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h, w = math.ceil(height * beta / factor) * factor, math.ceil(width * beta / factor) * factor
    return h, w


def _open(source: str, work_dir: str) -> Any:
    try:
        from PIL import Image  # Pillow: the [tools] extra
    except ModuleNotFoundError as e:
        raise missing_dependency(e, "image_zoom_in_tool") from None

    if source.lower().startswith(("http://", "https://")):
        try:
            data, _, _ = fetch(source, MAX_IMAGE_BYTES, FETCH_TIMEOUT)
        except FetchError as e:
            raise ValueError(f"the image could not be fetched: {e}") from None
        return Image.open(io.BytesIO(data))
    if source.startswith("data:"):
        import base64

        return Image.open(io.BytesIO(base64.b64decode(source.split(",", 1)[1])))
    path = source.removeprefix("file://")
    return Image.open(path if os.path.exists(path) else os.path.join(work_dir, os.path.basename(path)))


def _bicubic() -> Any:
    from PIL import Image

    return Image.Resampling.BICUBIC
