# SPDX-License-Identifier: Apache-2.0
"""hayhooks 2.1's runtime-deployment routes (`POST /deploy-yaml`, `POST /deploy_files`) as `serve --allow-deploy`
serves them: a deployment that fails because of what was sent answers 422 with the reason instead of 500."""

from collections.abc import Awaitable
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from haystack import logging
from hayhooks.server.exceptions import PipelineAlreadyExistsError, PipelineFilesError, PipelineRollbackError
from hayhooks.server.routers.deploy import DeployResponse, PipelineFilesRequest, YamlDeployRequest
from hayhooks.server.utils.deploy_utils import deploy_pipeline_files_async, deploy_pipeline_yaml_async

logger = logging.getLogger(__name__)

router = APIRouter()


def served_app(request: Request):
    """The hayhooks app to deploy into (`app.DeployRoutes` serves these routes from an app of their own)."""
    return getattr(request.app.state, "served_app", request.app)


def deployment_error(exc: Exception) -> HTTPException:
    """The HTTP error for a failed deployment: 409 name taken, 500 failed rollback or disk error, else 422."""
    if isinstance(exc, HTTPException):
        return exc
    if isinstance(exc, PipelineAlreadyExistsError):
        return HTTPException(status_code=409, detail=f"{exc} (send `overwrite: true` to replace it)")
    cause = exc.__cause__
    if isinstance(exc, PipelineRollbackError) or (
        isinstance(exc, PipelineFilesError) and isinstance(cause, OSError) and not isinstance(cause, ValueError)
    ):
        logger.error("Deployment failed on the server's side: {error}", error=exc)
        return HTTPException(status_code=500, detail=str(exc))
    return HTTPException(status_code=422, detail=f"The pipeline could not be deployed: {exc}")


async def _deployed(deployment: Awaitable[dict[str, Any]]) -> DeployResponse:
    """Await a hayhooks deployment: the response naming its endpoint, or raise the `deployment_error` it maps to."""
    try:
        result = await deployment
    except Exception as exc:  # noqa: BLE001 - mapped to the HTTP status that says whose fault it was
        raise deployment_error(exc) from exc
    return DeployResponse(name=result["name"], success=True, endpoint=f"/{result['name']}/run")


@router.post(
    "/deploy-yaml",
    tags=["config"],
    operation_id="yaml_pipeline_deploy",
    response_model=DeployResponse,
    summary="Deploy a pipeline from a YAML definition (only with `serve --allow-deploy`)",
)
async def deploy_yaml(yaml_request: YamlDeployRequest, request: Request) -> DeployResponse:
    """Deploy a YAML pipeline (with declared `inputs`/`outputs`); 409 if it exists and `overwrite` is false."""
    return await _deployed(
        deploy_pipeline_yaml_async(
            app=served_app(request),
            pipeline_name=yaml_request.name,
            source_code=yaml_request.source_code,
            overwrite=yaml_request.overwrite,
            options={
                "description": yaml_request.description,
                "skip_mcp": yaml_request.skip_mcp,
                "save_file": yaml_request.save_file,
            },
        )
    )


@router.post(
    "/deploy_files",
    tags=["config"],
    operation_id="pipeline_deploy",
    response_model=DeployResponse,
    summary="Deploy a pipeline from files: `pipeline_wrapper.py` and others (only with `serve --allow-deploy`)",
)
async def deploy_files(pipeline_files_request: PipelineFilesRequest, request: Request) -> DeployResponse:
    """Deploy a pipeline wrapper's files (its code runs in the server); 409 if it exists and `overwrite` is false."""
    return await _deployed(
        deploy_pipeline_files_async(
            app=served_app(request),
            pipeline_name=pipeline_files_request.name,
            files=pipeline_files_request.files,
            save_files=pipeline_files_request.save_files,
            overwrite=pipeline_files_request.overwrite,
        )
    )
