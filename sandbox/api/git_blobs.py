"""Git blobs (git/get-blob): a file's bytes by their blob SHA, base64-encoded, up to 100 MB, as GitHub serves them."""

from __future__ import annotations

import base64

from fastapi import APIRouter, Request

from .. import gitstore
from ..render.core import node_id
from .deps import Access
from .errors import ApiError, not_found, respond

router = APIRouter()
MAX_BYTES = 100 * 1024 * 1024  # "This API supports blobs up to 100 megabytes in size."


@router.get("/repos/{owner}/{repo}/git/blobs/{file_sha}")
def get_blob(request: Request, access: Access, file_sha: str):
    r, rr, _ = access
    data = gitstore.blob(r.path, file_sha) if len(file_sha) == 40 else None
    if data is None:
        raise not_found()
    if len(data) > MAX_BYTES:
        raise ApiError(403, "This API supports blobs up to 100 megabytes in size.")
    url = f"{rr.api(r)}/git/blobs/{file_sha}"
    body = {"sha": file_sha, "node_id": node_id("B", file_sha), "size": len(data), "url": url, "encoding": "base64"}
    encoded = base64.encodebytes(data).decode()  # with line breaks, as GitHub's
    return respond(200, {**body, "content": encoded})
