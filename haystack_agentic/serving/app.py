# SPDX-License-Identifier: Apache-2.0
"""
The HTTP app `haystack-agentic serve` runs: hayhooks' app (`POST /<name>/run`, `/v1/chat/completions`, ...) made
safe to expose.

- Runtime deployment is off unless allowed: hayhooks' `/deploy-yaml`, `/deploy_files` and `/undeploy/{name}`
  routes are removed, so they answer 404 (hayhooks 2.2 does the same with `HAYHOOKS_RUNTIME_DEPLOY_ENABLED=false`).
  When allowed, the deploy routes answer 4xx for what cannot be deployed (`deploy_routes`).
- With an API key, every route but `GET /health` needs `Authorization: Bearer <key>` (`security.BearerAuth`).
- Error responses are always encodable JSON: a request holding `NaN`, `Infinity` or a lone UTF-16 surrogate gets
  its 422 (FastAPI's own handler would fail to encode the echoed input and answer 500), and hayhooks' 501 for a
  pipeline without a chat interface becomes a 400 that says which endpoint to use. A YAML pipeline (served by
  hayhooks without our wrapper) that refuses its question answers 422 with the reason, not 500.

Two things keep a question's CPU cost down (one worker runs every concurrent question on one event loop):
- With hayhooks' tracing off (`HAYHOOKS_TRACING_ENABLED=false`: no `/traces` route), hayhooks would still copy every
  Haystack span into its in-memory trace buffer, which nothing then reads: that copy is turned off too, unless
  `HAYHOOKS_TRACING_INCLUDE_HAYSTACK_SPANS` is set explicitly.
- Once the app has started (pipelines deployed, stores loaded), what start-up left in memory is moved out of the
  garbage collector's reach (`gc.freeze()`): otherwise every full collection walks those objects again (several
  hundred thousand with the shipped corpus; one such pass cost ~0.4 s of CPU on this machine).

`create_app()` reads its settings from the environment, so uvicorn can build it in every worker
(`uvicorn haystack_agentic.serving.app:create_app --factory`).
"""

import gc
import math
import os
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from haystack import logging
from starlette.exceptions import HTTPException as StarletteHTTPException

from haystack_agentic.serving.agentic_loop_wrapper import invalid_input
from haystack_agentic.serving.security import HEALTH_PATH, BearerAuth, ServeSecurity

logger = logging.getLogger(__name__)

#: hayhooks' runtime-deployment routes (paths as declared by hayhooks 2.1).
DEPLOY_PATHS = frozenset({"/deploy-yaml", "/deploy_files", "/undeploy/{pipeline_name}"})
#: hayhooks' tracing routes check their own token (`HAYHOOKS_TRACING_TOKEN` or the local dashboard credential).
SELF_AUTHENTICATED_PREFIXES = ("/traces",)
#: Longest string echoed back in an error response (a 5 MB question is not sent back whole).
MAX_ECHOED_CHARS = 1000
#: hayhooks' switch for copying Haystack spans into its trace buffer (read by `/traces`).
TRACE_BUFFER_ENV = "HAYHOOKS_TRACING_INCLUDE_HAYSTACK_SPANS"


def create_app(security: ServeSecurity | None = None) -> FastAPI:
    """
    Build hayhooks' app for the pipelines in `HAYHOOKS_PIPELINES_DIR`, restricted by `security`.

    :param security: What to expose (default: from the environment, see `ServeSecurity.from_env`).
    :returns: The FastAPI app (pipelines deploy in its start-up).
    """
    from hayhooks.server.app import create_app as create_hayhooks_app

    security = security or ServeSecurity.from_env()
    skip_unread_trace_buffer()
    app = create_hayhooks_app()
    app.router.lifespan_context = freeze_after_startup(app.router.lifespan_context)
    remove_deploy_routes(app)
    if security.allow_deploy:
        from hayhooks.server.routers.undeploy import router as undeploy_router

        from haystack_agentic.serving.deploy_routes import router as deploy_router

        app.include_router(deploy_router)
        app.include_router(undeploy_router)
    app.add_api_route(HEALTH_PATH, _health, methods=["GET"], tags=["status"], summary="Liveness (no key needed)")
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    if security.api_key:
        app.add_middleware(
            BearerAuth,
            api_key=security.api_key,
            open_paths={HEALTH_PATH},
            open_prefixes=SELF_AUTHENTICATED_PREFIXES,
        )
    return app


def skip_unread_trace_buffer() -> bool:
    """
    Stop hayhooks copying Haystack spans into its trace buffer when its tracing is off (no `/traces` route reads
    the buffer then), unless `HAYHOOKS_TRACING_INCLUDE_HAYSTACK_SPANS` says otherwise. Call it before hayhooks
    builds its app (it installs the copying tracer then).

    :returns: Whether the copy was turned off.
    """
    from hayhooks.settings import settings

    if settings.tracing_enabled or TRACE_BUFFER_ENV in os.environ:
        return False
    settings.tracing_include_haystack_spans = False
    return True


def freeze_after_startup(
    lifespan: Callable[[Any], AbstractAsyncContextManager[Any]],
) -> Callable[[Any], AbstractAsyncContextManager[Any]]:
    """
    `lifespan` (an ASGI app's start-up and shutdown), followed at the end of start-up by a last collection and
    `gc.freeze()`: the objects start-up made (deployed pipelines, loaded documents, imported modules) live as long
    as the process, and frozen they are no longer walked by every full garbage collection.

    :param lifespan: The app's lifespan context factory (`app.router.lifespan_context`).
    :returns: The wrapped factory.
    """

    @asynccontextmanager
    async def frozen_lifespan(app: Any) -> AsyncIterator[Any]:
        async with lifespan(app) as state:
            gc.collect()
            gc.freeze()
            yield state

    return frozen_lifespan


def remove_deploy_routes(app: FastAPI) -> list[str]:
    """
    Remove hayhooks' runtime-deployment routes from `app`, so that they answer 404.

    FastAPI keeps an included router as one entry of `app.router.routes` pointing at the original router (shared
    by every app hayhooks builds): such an entry is dropped whole, and the shared router is left untouched.

    :param app: A hayhooks app.
    :returns: The paths removed.
    :raises RuntimeError: If a deploy route sits in an included router together with other routes (a hayhooks
        layout this function does not know: refusing to serve is safer than serving it).
    """
    removed: list[str] = []
    kept = []
    for entry in app.router.routes:
        routes = _api_routes(entry)
        deploy = [route.path for route in routes if _is_deploy_route(route)]
        if not deploy:
            kept.append(entry)
            continue
        if len(deploy) != len(routes):
            others = sorted(route.path for route in routes if not _is_deploy_route(route))
            raise RuntimeError(f"Cannot remove hayhooks' deploy routes {deploy} without also removing {others}.")
        removed += deploy
    app.router.routes[:] = kept
    if hasattr(app.router, "_mark_routes_changed"):  # FastAPI caches resolved included routes by a version
        app.router._mark_routes_changed()
    app.openapi_schema = None
    return removed


def _api_routes(entry: Any) -> list[APIRoute]:
    """The `APIRoute`s of a route entry: itself, or every route of an included router (recursively)."""
    if isinstance(entry, APIRoute):
        return [entry]
    router = getattr(entry, "original_router", None)  # FastAPI's lazy `_IncludedRouter`
    if router is None:
        return []
    return [route for child in router.routes for route in _api_routes(child)]


def _is_deploy_route(route: APIRoute) -> bool:
    from hayhooks.server.routers.deploy import deploy_files, deploy_yaml
    from hayhooks.server.routers.undeploy import undeploy

    return route.path in DEPLOY_PATHS or route.endpoint in (deploy_files, deploy_yaml, undeploy)


async def _health() -> dict[str, str]:
    return {"status": "ok"}


def json_safe(value: Any) -> Any:
    """
    `value` with what JSON cannot encode made encodable: non-finite floats become strings (`"nan"`), lone UTF-16
    surrogates become escapes (`"\\\\ud800"`), strings over `MAX_ECHOED_CHARS` are cut (with a note), anything else
    that is not plain data becomes its `str`.
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, str):
        text = value if len(value) <= MAX_ECHOED_CHARS else f"{value[:MAX_ECHOED_CHARS]}... ({len(value)} characters)"
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {str(json_safe(key)): json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    return json_safe(str(value))


async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    return JSONResponse(status_code=422, content={"detail": json_safe(exc.errors())})


async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
    """FastAPI's HTTP error handler, with an encodable body and the two status fixes in the module docstring."""
    status, detail = exc.status_code, exc.detail
    refused = invalid_input(exc.__cause__) if status == 500 else None
    if refused is not None:  # a YAML pipeline served by hayhooks refused the question or filters
        status, detail = 422, str(refused)
    elif status == 501:  # hayhooks: the named pipeline has no chat / responses interface
        status = 400
        detail = f"{detail}: this pipeline has no chat interface; call it with POST /<name>/run instead."
    headers = getattr(exc, "headers", None)
    if status in (204, 304) or status < 200:  # no body allowed
        return Response(status_code=status, headers=headers)
    return JSONResponse({"detail": json_safe(detail)}, status_code=status, headers=headers)
