"""agentsite's A2A request handler: the SDK's transports call it, it answers from the log.

The a2a-sdk's routes (``a2a_api.app``) parse both bindings, check the
``A2A-Version`` header, and turn what this handler returns or raises into the
protocol's responses, errors and server-sent events. Every method reads and
writes through ``a2a_api.services``, on the database threads; a stream or a
waiting ``SendMessage`` is a coroutine on the web process's loop that follows
the log (``responses.live``) and holds no thread between its reads, which run
on the stream-read threads (``sessions.streams.reads``) as the log's do.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, ParamSpec, TypeVar

from a2a.auth.user import User
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    ContentTypeNotSupportedError,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    InvalidParamsError,
    InvalidRequestError,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskNotCancelableError,
    TaskNotFoundError,
    TaskPushNotificationConfig,
    UnsupportedOperationError,
)
from a2a.utils.errors import A2AError
from a2a.utils.task import apply_history_length, validate_history_length, validate_page_size
from channels.db import database_sync_to_async
from google.protobuf import json_format

from a2a_api.card import agent_card
from a2a_api.mapping import STATE_NAMES, StepUpdates, task_of
from a2a_api.models import AgentTask, PushConfig
from a2a_api.push import push_config_delete, push_config_get, push_config_set, push_configs
from a2a_api.services import (
    INPUT_REQUIRED,
    TERMINAL,
    Decision,
    TaskView,
    decision_of,
    task_cancel_waiting,
    task_cursor,
    task_for,
    task_list,
    task_send,
    task_view,
)
from accounts.credentials import Credential, CredentialRevoked
from agentsite.core.errors import Conflict, DomainError, Invalid, NotFound, QuotaExceeded
from responses.live import response_cancel, response_events
from sessions.streams.reads import log_read

log = logging.getLogger(__name__)
P = ParamSpec("P")
R = TypeVar("R")
# Tasks a ListTasks with a status filter reads at most to fill a page.
STATUS_SCAN_MAX = 1000


class AgentsiteUser(User):
    """The caller, as the SDK's context carries it: the user an API token belongs to."""

    def __init__(self, user: Any, credential: Credential) -> None:
        self.django_user = user
        self.credential = credential

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return str(self.django_user.get_username())


def caller(context: ServerCallContext) -> AgentsiteUser:
    user = context.user
    if not isinstance(user, AgentsiteUser):  # the edge lets no anonymous call through
        raise InvalidRequestError(message="Send an agentsite API token as a Bearer token.")
    return user


def refusal(exc: DomainError) -> A2AError:
    """A domain refusal in A2A's words, its code and details kept as the error's data."""
    data = {"code": exc.code, **({"details": exc.details} if exc.details else {})}
    if isinstance(exc, NotFound):
        return TaskNotFoundError(message=exc.message, data=data)
    if isinstance(exc, Conflict):
        return UnsupportedOperationError(message=exc.message, data=data)
    if isinstance(exc, QuotaExceeded):
        return InvalidRequestError(message=exc.message, data=data)
    if isinstance(exc, Invalid):
        return InvalidParamsError(message=exc.message, data=data)
    return InvalidRequestError(message=exc.message, data=data)


def db(fn: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """``fn`` on a database thread, its domain refusals raised as A2A errors."""
    return _refusing(fn, database_sync_to_async(fn, thread_sensitive=False))


def stream_read(fn: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """``fn``, a stream's read, on a stream-read thread, its refusals raised as A2A errors.

    Those threads keep their database connection: a thread of ``db`` opens one for
    each call and closes it after, which on SQLite costs more than a task's view.
    """
    return _refusing(fn, log_read(fn))


def _refusing(fn: Callable[P, R], threaded: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    @functools.wraps(fn)
    async def call(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await threaded(*args, **kwargs)
        except DomainError as exc:
            raise refusal(exc) from exc

    return call


def message_read(message: Message) -> tuple[str, list[Decision]]:
    """A user message's text and the decisions its data parts carry."""
    if message.role != Role.ROLE_USER:
        raise InvalidParamsError(message="A message sent to the agent has the role ROLE_USER.")
    texts, decisions = [], []
    for part in message.parts:
        content = part.WhichOneof("content")
        if content == "text":
            texts.append(part.text)
            continue
        data = json_format.MessageToDict(part.data) if content == "data" else None
        try:
            decision = decision_of(data) if isinstance(data, dict) else None
        except Invalid as exc:
            raise refusal(exc) from exc
        if decision is None:
            raise ContentTypeNotSupportedError(
                message="The agent takes text parts, and data parts that decide one of its"
                ' requests ({"approval_request_id", "approve", "reason"}).'
            )
        decisions.append(decision)
    return "\n".join(texts), decisions


def _view(owner: Any, task_id: str) -> TaskView:
    return task_view(task_for(owner=owner, task_id=task_id))


class AgentsiteRequestHandler(RequestHandler):
    """The A2A methods over agentsite's tasks (``a2a_api.services``)."""

    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Task | Message:
        view = await self._send(params, context)
        if not params.configuration.return_immediately and view.state not in TERMINAL:
            async for _ in self._follow(view, caller(context).credential):
                pass
            view = await db(task_view)(view.task)
        return self._shaped(view, params.configuration)

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Any]:
        view = await self._send(params, context)
        yield self._shaped(view, params.configuration)
        async for update in self._follow(view, caller(context).credential):
            yield update

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Any]:
        user = caller(context)
        view = await stream_read(_view)(user.django_user, params.id)
        if view.state in TERMINAL:
            raise UnsupportedOperationError(
                message=f"The task has ended ({view.state}): read it with GetTask.",
                data={"code": "task_ended", "state": view.state},
            )
        yield task_of(view)
        async for update in self._follow(view, user.credential):
            yield update

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        validate_history_length(params)
        view = await db(_view)(caller(context).django_user, params.id)
        return apply_history_length(task_of(view), params)

    async def on_list_tasks(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        if params.HasField("page_size"):
            validate_page_size(params.page_size)
        validate_history_length(params)
        page_size = params.page_size if params.HasField("page_size") else 50
        owner = caller(context).django_user
        state = STATE_NAMES.get(params.status, "") if params.status else ""
        since = (
            params.status_timestamp_after.ToDatetime(tzinfo=UTC)
            if params.HasField("status_timestamp_after")
            else None
        )
        views, token, total = await db(_list)(
            owner, params.context_id, page_size, params.page_token, state, since
        )
        response = ListTasksResponse(next_page_token=token, page_size=page_size, total_size=total)
        for view in views:
            response.tasks.append(apply_history_length(task_of(view), params))
        return response

    async def on_cancel_task(
        self, params: CancelTaskRequest, context: ServerCallContext
    ) -> Task | None:
        owner = caller(context).django_user
        view = await db(_view)(owner, params.id)
        if view.state in TERMINAL:
            raise TaskNotCancelableError(
                message=f"The task has ended ({view.state}).",
                data={"code": "task_ended", "state": view.state},
            )
        if view.state == INPUT_REQUIRED:
            await db(task_cancel_waiting)(task=view.task)
        else:
            # Stops its turn and jobs, and waits for them to end: the task's real end.
            await response_cancel(view.inputs[-1])
        return task_of(await db(_view)(owner, params.id))

    # --- push notifications ---------------------------------------------------------------

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        owner = caller(context).django_user
        config = await db(_config_set)(owner, params.task_id, params)
        return config_of(config)

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        owner = caller(context).django_user
        config = await db(_config_get)(owner, params.task_id, params.id)
        return config_of(config)

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        owner = caller(context).django_user
        configs = await db(_configs)(owner, params.task_id)
        return ListTaskPushNotificationConfigsResponse(configs=[config_of(c) for c in configs])

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        owner = caller(context).django_user
        await db(_config_delete)(owner, params.task_id, params.id)

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        caller(context)
        base_url = str(context.state.get("base_url", ""))
        return agent_card(base_url, extended=True)

    # --- shared steps -------------------------------------------------------------------

    async def _send(self, params: SendMessageRequest, context: ServerCallContext) -> TaskView:
        validate_history_length(params.configuration)
        text, decisions = message_read(params.message)
        message = params.message
        push = None
        if params.configuration.HasField("task_push_notification_config"):
            push = params.configuration.task_push_notification_config
        # One thread and one connection for the message, the push configuration, the view.
        return await db(_sent)(
            caller(context).django_user,
            text=text,
            decisions=decisions,
            task_id=message.task_id,
            context_id=message.context_id,
            message_id=message.message_id,
            push=push,
        )

    def _shaped(self, view: TaskView, configuration: Any) -> Task:
        return apply_history_length(task_of(view), configuration)

    async def _follow(self, view: TaskView, credential: Credential) -> AsyncGenerator[Any]:
        """The current step's updates from where ``view`` stands, then the task's final
        status once the step has ended; nothing for a task that waits or has ended."""
        if view.state in TERMINAL or view.state == INPUT_REQUIRED:
            return
        updates = StepUpdates(view)
        try:
            async for event in response_events(
                view.inputs[-1],
                after=view.current.number - 1,
                credential=credential,
                job_progress=True,
            ):
                if event is None:
                    continue
                for update in updates.updates(event):
                    yield update
        except CredentialRevoked as exc:
            raise InvalidRequestError(
                message="The API token this stream was opened with no longer holds.",
                data={"code": "invalid_api_key"},
            ) from exc
        ended = await stream_read(_reloaded_view)(view.task)
        for report in updates.reports(ended):
            yield report
        yield updates.final(ended)


def config_of(config: PushConfig) -> TaskPushNotificationConfig:
    """A configuration as the client gave it (its credentials are not sent back)."""
    shown = TaskPushNotificationConfig(id=config.config_id, task_id=config.task_id, url=config.url)
    if config.token:
        shown.token = config.token
    if config.auth_scheme:
        shown.authentication.scheme = config.auth_scheme
    return shown


def _config_set(owner: Any, task_id: str, params: TaskPushNotificationConfig) -> PushConfig:
    task = task_for(owner=owner, task_id=task_id)
    return push_config_set(
        task=task,
        config_id=params.id,
        url=params.url,
        token=params.token,
        auth_scheme=params.authentication.scheme,
        auth_credentials=params.authentication.credentials,
    )


def _config_get(owner: Any, task_id: str, config_id: str) -> PushConfig:
    return push_config_get(task=task_for(owner=owner, task_id=task_id), config_id=config_id)


def _configs(owner: Any, task_id: str) -> list[PushConfig]:
    return push_configs(task=task_for(owner=owner, task_id=task_id))


def _config_delete(owner: Any, task_id: str, config_id: str) -> None:
    push_config_delete(task=task_for(owner=owner, task_id=task_id), config_id=config_id)


def _sent(
    owner: Any,
    *,
    text: str,
    decisions: list[Decision],
    task_id: str,
    context_id: str,
    message_id: str,
    push: TaskPushNotificationConfig | None,
) -> TaskView:
    task = task_send(
        owner=owner,
        text=text,
        decisions=decisions,
        task_id=task_id,
        context_id=context_id,
        message_id=message_id,
    )
    if push is not None:
        _config_set(owner, task.id, push)
    return task_view(task)


def _reloaded_view(task: AgentTask) -> TaskView:
    return task_view(AgentTask.objects.get(pk=task.pk))


def _list(
    owner: Any,
    context_id: str,
    page_size: int,
    page_token: str,
    state: str,
    since: datetime | None,
) -> tuple[list[TaskView], str, int]:
    """A page of views; with a ``state`` or a ``since``, of the tasks that match among the
    newest ``STATUS_SCAN_MAX`` from the page token on (a state is derived, not stored)."""
    if not state and since is None:
        tasks, token, total = task_list(
            owner=owner, context_id=context_id, page_size=page_size, page_token=page_token
        )
        return [task_view(t) for t in tasks], token, total

    def wanted(view: TaskView) -> bool:
        if state and view.state != state:
            return False
        return since is None or (view.status_at is not None and view.status_at > since)

    matches: list[TaskView] = []
    scanned = 0
    while scanned < STATUS_SCAN_MAX:
        tasks, page_token, _ = task_list(
            owner=owner, context_id=context_id, page_size=100, page_token=page_token
        )
        scanned += len(tasks)
        matches += [v for v in map(task_view, tasks) if wanted(v)]
        if not page_token:
            break
    shown = matches[:page_size]
    more = len(matches) > page_size or bool(page_token)
    return shown, (task_cursor(shown[-1].task) if more and shown else ""), len(matches)
