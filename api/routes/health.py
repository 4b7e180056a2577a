"""``GET /health``: the service answers (no key needed, nothing about tenants)."""

from __future__ import annotations

from fastapi import APIRouter, Request

from schemas.api import Health

__all__ = ["router"]

router = APIRouter(tags=["health"])


@router.get("/health", response_model=Health, summary="The service answers")
async def health(request: Request) -> Health:
    """200 while the server runs and its stores are open."""
    return Health(version=request.app.version)
