from __future__ import annotations

from django.urls import path

from jobs import views

app_name = "jobs"

urlpatterns = [
    path("jobs/<str:job_id>/", views.job_detail, name="detail"),
    path("jobs/<str:job_id>/report", views.job_report_fragment, name="report"),
    path("jobs/<str:job_id>/report.md", views.job_report_download, name="report_md"),
]
