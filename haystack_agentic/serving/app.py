# SPDX-License-Identifier: Apache-2.0
"""
The HTTP app `haystack-agentic serve` runs: hayhooks' app behind ASGI middleware.

The middleware: closed routes, CORS, `Host` check, API key, body size limit, encodable JSON errors. `create_app()`
reads its settings from the environment.
"""

import gc
import math
import os
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from haystack import logging
from starlette.exceptions import HTTPException as StarletteHTTPException

from haystack_agentic.serving.agentic_loop_wrapper import invalid_input
from haystack_agentic.serving.security import (
    HEALTH_PATH,
    BodyLimit,
    ClosedPaths,
    ServeSecurity,
    bearer_auth,
    host_check,
)

logger = logging.getLogger(__name__)

#: hayhooks' runtime-deployment routes (paths as declared by hayhooks 2.1), served with `--allow-deploy` only.
DEPLOY_PATHS = frozenset({"/deploy-yaml", "/deploy_files"})
#: hayhooks routes that cannot work offline (`/draw/{name}` calls an outside renderer) or do nothing (file uploads
#: are discarded): they answer 404.
CLOSED_PATHS = frozenset({"/v1/files", "/files", "/draw"})
CLOSED_PREFIXES = ("/draw/",)
#: hayhooks' tracing routes check their own token (`HAYHOOKS_TRACING_TOKEN` or the local dashboard credential).
SELF_AUTHENTICATED_PREFIXES = ("/traces",)
#: Longest string echoed back in an error response (a 5 MB question is not sent back whole).
MAX_ECHOED_CHARS = 1000
#: hayhooks' switch for copying Haystack spans into its trace buffer (read by `/traces`).
TRACE_BUFFER_ENV = "HAYHOOKS_TRACING_INCLUDE_HAYSTACK_SPANS"


def create_app(security: ServeSecurity | None = None) -> FastAPI:
    """
    hayhooks' app for the pipelines in `HAYHOOKS_PIPELINES_DIR`, restricted by `security`.

    `security` defaults to `ServeSecurity.from_env()`. Without `allow_deploy`, hayhooks' durable mode: the pipelines
    load once, here, into a fixed registry (`app.state.pipeline_registry`), and the deploy routes do not exist.
    """
    from hayhooks.server.app import create_app as create_hayhooks_app
    from hayhooks.settings import settings

    security = security or ServeSecurity.from_env()
    skip_unread_trace_buffer()
    settings.cors_allow_origins = list(security.cors_origins)  # hayhooks' default is `*`
    settings.durable_mode = not security.allow_deploy
    app = create_hayhooks_app()
    app.router.lifespan_context = freeze_after_startup(app.router.lifespan_context)
    app.add_api_route(HEALTH_PATH, _health, methods=["GET"], tags=["status"], summary="Liveness (no key needed)")
    # Error responses always encodable JSON (`json_safe`): a request holding `NaN` or a lone surrogate gets its 422,
    # not a 500; hayhooks' 501 (no chat) becomes a 400, a served YAML refusing its question a 422, a deployment that
    # fails because of what was sent a 422 (`deployment_error`).
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_middleware(ClosedPaths, paths=CLOSED_PATHS, prefixes=CLOSED_PREFIXES)
    _hide_from_openapi(app, CLOSED_PATHS, CLOSED_PREFIXES)
    if security.api_key:
        app.add_middleware(
            bearer_auth, api_key=security.api_key, open_paths={HEALTH_PATH}, open_prefixes=SELF_AUTHENTICATED_PREFIXES
        )
    app.add_middleware(BodyLimit, max_bytes=security.max_body_bytes)
    app.add_middleware(host_check, hosts=security.accepted_hosts())
    return app


def _hide_from_openapi(app: FastAPI, paths: frozenset[str], prefixes: tuple[str, ...]) -> None:
    """Leave the closed routes out of `/openapi.json` (FastAPI's documented way: replace `app.openapi`)."""
    schema_of = app.openapi

    def openapi() -> dict:
        schema = schema_of()
        schema["paths"] = {
            path: item
            for path, item in schema.get("paths", {}).items()
            if path not in paths and not path.startswith(prefixes) and path.rstrip("/") not in paths
        }
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def skip_unread_trace_buffer() -> bool:
    """Stop hayhooks buffering Haystack spans nobody reads (unless `TRACE_BUFFER_ENV`); returns whether it did."""
    from hayhooks.settings import settings

    if settings.tracing_enabled or TRACE_BUFFER_ENV in os.environ:
        return False
    settings.tracing_include_haystack_spans = False
    return True


def freeze_after_startup(
    lifespan: Callable[[Any], AbstractAsyncContextManager[Any]],
) -> Callable[[Any], AbstractAsyncContextManager[Any]]:
    """The app's lifespan factory, with `gc.collect()` and `gc.freeze()` at the end of start-up."""

    @asynccontextmanager
    async def frozen_lifespan(app: Any) -> AsyncIterator[Any]:
        async with lifespan(app) as state:
            gc.collect()
            gc.freeze()
            yield state

    return frozen_lifespan


async def _health() -> dict[str, str]:
    return {"status": "ok"}


def json_safe(value: Any) -> Any:
    """
    `value` made encodable as JSON.

    Non-finite floats as strings (`"nan"`), lone surrogates escaped, strings cut at `MAX_ECHOED_CHARS` (with a note),
    anything else that is not plain data as its `str`.
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


async def _validation_error(_request: Request, exc: RequestValidationError) -> JSONResponse:
    return JSONResponse(status_code=422, content={"detail": json_safe(exc.errors())})


def deployment_error(exc: Exception) -> tuple[int, Any]:
    """`(status, detail)` of a failed deployment: 409 name taken, 500 failed rollback or disk error, else 422."""
    from hayhooks.server.exceptions import PipelineAlreadyExistsError, PipelineFilesError, PipelineRollbackError

    if isinstance(exc, StarletteHTTPException):
        return exc.status_code, exc.detail
    if isinstance(exc, PipelineAlreadyExistsError):
        return 409, f"{exc} (send `overwrite: true` to replace it)"
    cause = exc.__cause__
    if isinstance(exc, PipelineRollbackError) or (
        isinstance(exc, PipelineFilesError) and isinstance(cause, OSError) and not isinstance(cause, ValueError)
    ):
        logger.error("Deployment failed on the server's side: {error}", error=exc)
        return 500, str(exc)
    return 422, f"The pipeline could not be deployed: {exc}"


async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
    status, detail = exc.status_code, exc.detail
    if request.url.path in DEPLOY_PATHS and isinstance(exc.__cause__, Exception):  # hayhooks' deploy routes
        status, detail = deployment_error(exc.__cause__)
    elif status == HTTPStatus.INTERNAL_SERVER_ERROR and (refused := invalid_input(exc.__cause__)) is not None:
        # a served YAML refused its input
        status, detail = 422, str(refused)
    elif status == HTTPStatus.NOT_IMPLEMENTED:  # hayhooks: the named pipeline has no chat / responses interface
        status = 400
        detail = f"{detail}: this pipeline has no chat interface; call it with POST /<name>/run instead."
    headers = getattr(exc, "headers", None)
    if status in (204, 304) or status < HTTPStatus.OK:  # no body allowed
        return Response(status_code=status, headers=headers)
    return JSONResponse({"detail": json_safe(detail)}, status_code=status, headers=headers)
