"""Websocket routes of the sessions app."""

from __future__ import annotations

from django.urls import URLPattern, path

from sessions.consumers import SessionConsumer

websocket_urlpatterns: list[URLPattern] = [
    path("ws/sessions/<str:session_id>/", SessionConsumer.as_asgi()),
]
