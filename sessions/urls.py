from __future__ import annotations

from django.urls import path

from sessions import views

app_name = "sessions"

urlpatterns = [
    path("", views.session_list, name="list"),
    path("approvals/", views.approvals_pending, name="approvals"),
    path("sessions/new", views.session_new, name="new"),
    path("sessions/<str:session_id>/", views.session_chat, name="chat"),
]
