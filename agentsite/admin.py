from __future__ import annotations

from django.contrib import admin

# The change lists are wide (the job list has seven columns and a filter column):
# on a 1280-pixel window the navigation sidebar would leave them too little room
# and cut off their last columns. The index page and the breadcrumbs navigate.
admin.site.enable_nav_sidebar = False
