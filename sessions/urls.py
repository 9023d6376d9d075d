from __future__ import annotations

from django.urls import path

from sessions import views

app_name = "sessions"

urlpatterns = [
    path("", views.session_list, name="list"),
    path("sessions/new", views.session_new, name="new"),
    path("sessions/<str:session_id>/", views.session_chat, name="chat"),
    path("jobs/<str:job_id>/", views.job_detail, name="job"),
    path("jobs/<str:job_id>/report", views.job_report_fragment, name="job_report"),
    path("jobs/<str:job_id>/report.md", views.job_report_download, name="job_report_md"),
]
